package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
)

// Helpers for the client commands: a group's file needs only these and
// output.go.

// ctxT shortens fetch functions' signatures.
type ctxT = context.Context

// withClient makes a RunE that calls fn with the API client the global
// flags describe.
func (a *app) withClient(fn func(cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := a.client(cmd)
		if err != nil {
			return err
		}
		return fn(cmd, c, args)
	}
}

// group returns a command group: name with its commands. Run without a
// command, or with one it does not have, it is a usage error.
func group(name, short string, cmds ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: name, Short: short, Args: cobra.ArbitraryArgs, RunE: noSubcommand}
	g.AddCommand(cmds...)
	return g
}

func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usageErrorf(cmd, "%s needs a command", cmd.Name())
	}
	return usageErrorf(cmd, "unknown command %q for %s", args[0], cmd.CommandPath())
}

// exactArgs wants exactly the named arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usageErrorf(cmd, "%s needs %s", cmd.CommandPath(), strings.Join(names[len(args):], " "))
		case len(args) > len(names):
			return usageErrorf(cmd, "%s: unexpected argument %q", cmd.CommandPath(), args[len(names)])
		}
		return nil
	}
}

// optionalArgs takes at most the named arguments.
func optionalArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > len(names) {
			return usageErrorf(cmd, "%s: unexpected argument %q", cmd.CommandPath(), args[len(names)])
		}
		return nil
	}
}
