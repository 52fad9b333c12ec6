// Command herald runs Herald: `herald demo` runs the example workflows end to
// end on a SQLite file and prints their timelines.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `herald — durable workflows whose centre is external events

usage:
  herald demo [--db FILE | --postgres URL [--schema NAME]]
                              run the example workflows and print their timelines
                              (SQLite file by default, recreated; PostgreSQL with --postgres
                              or $HERALD_DATABASE_URL, in a schema that is recreated)
  herald help                 this text
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Print(usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "demo":
		return runDemo(ctx, args[1:], os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	default:
		fmt.Print(usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
