package crashfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A process must not use through mmap a FUSE file system that it serves
// itself: a page fault on a mapped file (SQLite's -shm) holds the address
// space's lock while the kernel waits for the server, and the server's Go
// runtime may need that lock to grow the heap; and a process that exits
// with dirty mapped pages waits, in the kernel, for a server that is
// itself. Tests that run a store on the mount in their own process serve it
// from a child process instead: StartRemote and ServeChild.

const (
	serveEnv = "HERALD_CRASHFS_SERVE"
)

// Remote is a crashfs mounted and served by a child process.
type Remote struct {
	Dir string

	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr strings.Builder
}

// StartRemote runs the test binary again to run only the test function
// named test, which must call ServeChild, and has it mount an empty crashfs
// on dir. Close it when done.
func StartRemote(test, dir string) (*Remote, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), serveEnv+"="+dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r := &Remote{Dir: dir, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	cmd.Stderr = &r.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if _, err := r.answer(); err != nil {
		r.in.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("crashfs: start the server: %w (%s)", err, r.stderr.String())
	}
	return r, nil
}

// answer reads the server's next answer: "ok [value]" or "error: ...".
func (r *Remote) answer() (string, error) {
	for r.out.Scan() {
		line := r.out.Text()
		if v, ok := strings.CutPrefix(line, "crashfs ok"); ok {
			return strings.TrimSpace(v), nil
		}
		if e, ok := strings.CutPrefix(line, "crashfs error: "); ok {
			return "", errors.New(e)
		}
		// Anything else is the test framework's output.
	}
	return "", fmt.Errorf("crashfs server ended: %v", r.out.Err())
}

func (r *Remote) do(cmd string) (string, error) {
	if _, err := io.WriteString(r.in, cmd+"\n"); err != nil {
		return "", fmt.Errorf("crashfs %s: %w", cmd, err)
	}
	v, err := r.answer()
	if err != nil {
		return "", fmt.Errorf("crashfs %s: %w", cmd, err)
	}
	return v, nil
}

// SetCapacity is FS.SetCapacity.
func (r *Remote) SetCapacity(n int64) error {
	_, err := r.do("capacity " + strconv.FormatInt(n, 10))
	return err
}

// Used is FS.Used.
func (r *Remote) Used() (int64, error) {
	v, err := r.do("used")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// FailSyncs is FS.FailSyncs.
func (r *Remote) FailSyncs(errno syscall.Errno) error {
	_, err := r.do("fail " + strconv.Itoa(int(errno)))
	return err
}

// Durable writes FS.Durable's files into dir.
func (r *Remote) Durable(dir string) error {
	_, err := r.do("durable " + dir)
	return err
}

// Close unmounts the file system (every file on it must be closed) and
// ends the server.
func (r *Remote) Close() error {
	_, err := r.do("exit")
	r.in.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case werr := <-done:
		return errors.Join(err, werr)
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		return errors.Join(err, errors.New("crashfs server did not exit"))
	}
}

// ServeChild is the server side of StartRemote: in the child process it
// mounts an empty crashfs on the directory it was given and runs the
// parent's commands until told to exit (or its stdin ends), and returns
// true; in any other process it returns false at once.
func ServeChild() (bool, error) {
	dir := os.Getenv(serveEnv)
	if dir == "" {
		return false, nil
	}
	f := New(nil)
	if err := f.Mount(dir); err != nil {
		fmt.Printf("crashfs error: %v\n", err)
		return true, err
	}
	defer f.Unmount()
	fmt.Println("crashfs ok")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		var (
			out string
			err error
		)
		switch cmd {
		case "capacity":
			var n int64
			if n, err = strconv.ParseInt(arg, 10, 64); err == nil {
				f.SetCapacity(n)
			}
		case "used":
			out = strconv.FormatInt(f.Used(), 10)
		case "fail":
			var n int
			if n, err = strconv.Atoi(arg); err == nil {
				f.FailSyncs(syscall.Errno(n))
			}
		case "durable":
			for name, b := range f.Durable() {
				if err = os.WriteFile(filepath.Join(arg, name), b, 0o644); err != nil {
					break
				}
			}
		case "exit":
			err = f.Unmount()
			if err != nil {
				fmt.Printf("crashfs error: %v\n", err)
			} else {
				fmt.Println("crashfs ok")
			}
			return true, err
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			fmt.Printf("crashfs error: %v\n", err)
		} else {
			fmt.Printf("crashfs ok %s\n", out)
		}
	}
	return true, sc.Err()
}
