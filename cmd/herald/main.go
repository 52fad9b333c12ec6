// Command herald runs Herald: `herald demo` runs the example workflows end to
// end on a store it creates and prints their timelines; `herald version`
// says which build this is.
//
// Exit codes: 0 on success (help included), 1 when a command fails, 2 for a
// usage error (no command, an unknown command, a bad flag).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/heraldwf/herald"
)

const usage = `herald — durable workflows whose centre is external events

usage:
  herald demo [flags]    run the example workflows and print their timelines
                         (herald demo -h for its flags)
  herald version         print the version, the source revision and the Go version
  herald help [command]  this text, or a command's

Exit status: 0 on success, 1 when the command fails, 2 for a usage error.
`

// version is the release this binary was built as. Release builds set it:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/herald
//
// Empty, the module version from the build information is used ("(devel)"
// for a build from a checkout).
var version string

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	// Scripts of the event bus run in child processes of this program.
	herald.ServeScriptChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name) and returns
// the exit code. Help goes to stdout; errors and the usage that follows a
// usage error go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "version", "--version":
		if len(rest) > 0 {
			return usageError(stderr, "version takes no arguments", usage)
		}
		fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo))
		return exitOK
	case "help", "-h", "-help", "--help":
		switch {
		case len(rest) == 0:
			fmt.Fprint(stdout, usage)
		case len(rest) == 1 && rest[0] == "demo":
			fmt.Fprint(stdout, demoUsage)
		case len(rest) == 1 && rest[0] == "version":
			fmt.Fprint(stdout, usage)
		default:
			return usageError(stderr, fmt.Sprintf("no help for %q", rest), usage)
		}
		return exitOK
	default:
		return usageError(stderr, fmt.Sprintf("unknown command %q", cmd), usage)
	}
}

// usageError reports a usage error: a short message, then the usage, on
// stderr.
func usageError(stderr io.Writer, msg, usage string) int {
	fmt.Fprintf(stderr, "herald: %s\n\n%s", msg, usage)
	return exitUsage
}

// failed reports a command that failed.
func failed(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "herald:", err)
	return exitFail
}

// parseFlags parses args with fs, whose own output is silenced: -h prints
// the usage to stdout (exit 0), a bad flag or a stray argument prints a
// message and the usage to stderr (exit 2). ok is false when the command
// should end with code.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK, false
	case err != nil:
		return usageError(stderr, fs.Name()+": "+err.Error(), usage), false
	case fs.NArg() > 0:
		return usageError(stderr, fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0)), usage), false
	}
	return exitOK, true
}

// versionLine says which build this is: the version (the ldflags one, else
// the module's), the VCS revision and time with "modified" for a dirty tree,
// and the Go version and platform.
func versionLine(readBuildInfo func() (*debug.BuildInfo, bool)) string {
	v, rev, when, modified := version, "", "", false
	if info, ok := readBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(unknown)"
	}
	line := "herald " + v
	switch {
	case rev != "":
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += ", revision " + rev
		if when != "" {
			line += " (" + when + ")"
		}
		if modified {
			line += ", modified"
		}
	default:
		line += ", revision unknown (built without VCS information, e.g. by go run)"
	}
	return line + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
