// Command herald runs Herald: `herald serve` runs the server (the engine,
// the event bus and the HTTP API); `herald demo` runs the example
// workflows end to end on a store it creates and prints their timelines;
// the other commands talk to a running server through its HTTP API
// (package httpapi/client); `herald version` says which build this is.
//
// The command line is built with cobra. Each command group lives in its own
// file and adds itself to the root in an init function (addCommand), so a
// new group is one new file. Output goes through output.go: a table or a
// listing for people, the API's JSON with --json.
//
// Exit codes: 0 on success (help included), 1 when a command fails, 2 for a
// usage error (no command, an unknown command, a bad flag or argument), 3
// when the server answers not_found, 4 when it refuses the key (401, 403).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/client"
)

const rootLong = `herald — durable workflows whose centre is external events

The client commands (instances, keys, tenants …) talk to a running
herald serve through its HTTP API. Their flags can come from the
environment: --server from HERALD_SERVER, --api-key from HERALD_API_KEY,
--tenant from HERALD_TENANT. With --json a command prints the API's JSON
answer; otherwise a table or a listing.

Exit status: 0 on success, 1 when the command fails, 2 for a usage error,
3 when the server answers not_found, 4 when it refuses the API key
(401 unauthorized, 403 forbidden).`

// usageTemplate is cobra's usage text in the style of the rest of herald's
// output (lower case headings).
const usageTemplate = `usage:{{if and .Runnable (not .HasAvailableSubCommands)}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} <command> [flags]{{end}}{{if gt (len .Aliases) 0}}

aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

global flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

"{{.CommandPath}} <command> --help" tells more about a command.{{end}}
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
	exitOK       = 0
	exitFail     = 1
	exitUsage    = 2
	exitNotFound = 3
	exitAuth     = 4
)

// readBuildInfo is debug.ReadBuildInfo.
var readBuildInfo = debug.ReadBuildInfo

// Defaults of the global flags.
const defaultServer = "http://127.0.0.1:8080"

func main() {
	// Scripts of the event bus run in child processes of this program.
	herald.ServeScriptChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app is one run of the command line: where output goes, the environment,
// and the global flags.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	// Global flags (resolved against the environment by flagOrEnv).
	server, apiKey, tenant string
	json                   bool

	root *cobra.Command
}

// commands are the constructors of the command groups under the root; each
// group's file adds its own in an init function.
var commands []func(*app) *cobra.Command

// addCommand adds a command group to every root built from now on.
func addCommand(f func(*app) *cobra.Command) { commands = append(commands, f) }

// run runs the command line args (without the program name) and returns
// the exit code. Help goes to stdout; errors and the usage that follows a
// usage error go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runEnv(ctx, args, stdout, stderr, os.Getenv)
}

// runEnv is run with the environment read through getenv (tests pass their
// own).
func runEnv(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv}
	root := a.newRoot()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return a.exit(err)
}

// newRoot builds the command tree.
func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "herald",
		Short:         "durable workflows whose centre is external events",
		Long:          rootLong,
		Version:       versionLine(readBuildInfo),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command, herald is a usage error; an unknown command
		// too (cobra would call it a plain failure).
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf(cmd, "unknown command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{cmd: cmd, msg: "no command given"}
		},
	}
	a.root = root
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{cmd: cmd, msg: err.Error()}
	})
	root.SetHelpCommand(a.helpCommand())
	root.CompletionOptions.HiddenDefaultCmd = false

	pf := root.PersistentFlags()
	pf.StringVar(&a.server, "server", "", "the server's URL (env HERALD_SERVER; default "+defaultServer+")")
	pf.StringVar(&a.apiKey, "api-key", "", "the API key (env HERALD_API_KEY)")
	pf.StringVar(&a.tenant, "tenant", "", "the tenant an admin key acts on, sent as the Herald-Tenant header (env HERALD_TENANT; default: the server's, \"default\")")
	pf.BoolVar(&a.json, "json", false, "print the API's JSON answer instead of a table")

	root.AddCommand(a.versionCommand(), a.demoCommand(), a.serveCommand())
	for _, f := range commands {
		root.AddCommand(f(a))
	}
	return root
}

// helpCommand is `herald help [command]`: help on stdout, exit 0; help on
// a command that does not exist is a usage error.
func (a *app) helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "this text, or a command's",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := a.root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return usageErrorf(a.root, "no help for %q", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version, the source revision and the Go version",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf(cmd, "version takes no arguments")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(a.stdout, versionLine(readBuildInfo))
			return nil
		},
	}
}

// flagOrEnv returns the value of cmd's flag name if it was given, else the
// environment variable env if set, else def.
func (a *app) flagOrEnv(cmd *cobra.Command, name, env, def string) string {
	if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
		return f.Value.String()
	}
	if v := a.getenv(env); v != "" {
		return v
	}
	return def
}

// client returns the API client the global flags (and the environment)
// describe.
func (a *app) client(cmd *cobra.Command) (*client.Client, error) {
	server := a.flagOrEnv(cmd, "server", "HERALD_SERVER", defaultServer)
	key := a.flagOrEnv(cmd, "api-key", "HERALD_API_KEY", "")
	tenant := a.flagOrEnv(cmd, "tenant", "HERALD_TENANT", "")
	c, err := client.New(server, key, client.WithTenant(tenant))
	if err != nil {
		return nil, usageErrorf(cmd, "--server: %v", err)
	}
	return c, nil
}

// usageError is a command line herald cannot run: it exits 2 after the
// message and the command's usage.
type usageError struct {
	cmd *cobra.Command
	msg string
	// usage replaces the command's usage text when not empty.
	usage string
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitCode ends a command whose output is already written with code.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// exit reports err and returns the exit code for it.
func (a *app) exit(err error) int {
	if err == nil {
		return exitOK
	}
	var code exitCode
	var ue *usageError
	var ae *client.Error
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &ue):
		usage := ue.usage
		if usage == "" && ue.cmd != nil {
			usage = ue.cmd.UsageString()
		}
		fmt.Fprintf(a.stderr, "herald: %s\n\n%s", ue.msg, usage)
		return exitUsage
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ae):
		fmt.Fprintln(a.stderr, "herald:", problemLine(ae))
		for _, r := range ae.Reasons {
			fmt.Fprintln(a.stderr, "  -", r)
		}
		switch {
		case ae.Code == "not_found":
			return exitNotFound
		case ae.Status == 401 || ae.Status == 403:
			return exitAuth
		}
		return exitFail
	case errors.As(err, &oe) && oe.Op == "dial", errors.As(err, &ne) && ne.Timeout():
		fmt.Fprintf(a.stderr, "herald: %v\n(is herald serve running there? --server or HERALD_SERVER names it)\n", err)
		return exitFail
	}
	fmt.Fprintln(a.stderr, "herald:", err)
	return exitFail
}

// problemLine says what an API error answer means, in one line.
func problemLine(e *client.Error) string {
	what := strings.TrimPrefix(e.Detail, "herald: ")
	if what == "" {
		what = e.Title
	}
	line := fmt.Sprintf("%s (%d %s)", what, e.Status, e.Code)
	if e.Status == 401 {
		line += "; give a key with --api-key or HERALD_API_KEY"
	}
	return line
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
