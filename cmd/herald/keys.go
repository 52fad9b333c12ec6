package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() { addCommand((*app).keysCommand) }

// keysCommand is `herald keys`: API keys (admin key needed).
func (a *app) keysCommand() *cobra.Command {
	return group("keys", "create, list and revoke API keys (admin key needed)",
		a.keysCreate(), a.keysList(), a.keysRevoke())
}

func (a *app) keysCreate() *cobra.Command {
	var req wire.CreateKeyRequest
	cmd := &cobra.Command{
		Use:   "create (TENANT | --admin) [--name NAME]",
		Short: "create a key for a tenant, or an admin key; its secret is printed this once",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case req.Admin && len(args) > 0:
				return usageErrorf(cmd, "an admin key has no tenant: give TENANT or --admin, not both")
			case req.Admin:
				return nil
			}
			return exactArgs("TENANT")(cmd, args)
		},
	}
	cmd.Flags().BoolVar(&req.Admin, "admin", false, "an admin key (manages tenants and keys, acts on any tenant)")
	cmd.Flags().StringVar(&req.Name, "name", "", "a label for the key")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		req := req
		if len(args) > 0 {
			req.Tenant = args[0]
		}
		out, err := c.CreateKey(cmd.Context(), req)
		if err != nil {
			return err
		}
		return a.emit(out, func(w io.Writer) error {
			who := "tenant " + out.Key.Tenant
			if out.Key.Admin {
				who = "admin"
			}
			fmt.Fprintf(w, "created key %s (%s)\n", out.Key.ID, who)
			fmt.Fprintf(w, "secret: %s\n", out.Secret)
			fmt.Fprintln(a.stderr, "The secret is shown this once and only its hash is kept: store it now.")
			return nil
		})
	})
	return cmd
}

func (a *app) keysList() *cobra.Command {
	var revoked bool
	cmd := &cobra.Command{
		Use:   "list [TENANT]",
		Short: "list keys (of TENANT, or all), never their secrets",
		Args:  optionalArgs("TENANT"),
	}
	cmd.Flags().BoolVar(&revoked, "revoked", false, "list revoked keys too")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		tenant := ""
		if len(args) > 0 {
			tenant = args[0]
		}
		keys, err := c.Keys(cmd.Context(), tenant, revoked)
		if err != nil {
			return err
		}
		return emitPage(a, &wire.Page[*wire.APIKey]{Items: keys},
			[]string{"ID", "TENANT", "ADMIN", "NAME", "CREATED", "LAST USED", "REVOKED"},
			func(k *wire.APIKey) []any {
				return []any{k.ID, k.Tenant, k.Admin, k.Name, k.CreatedAt, k.LastUsedAt, k.RevokedAt}
			})
	})
	return cmd
}

func (a *app) keysRevoke() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "revoke a key: it authenticates nothing from now on",
		Args:  exactArgs("ID"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		k, err := c.RevokeKey(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(k, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "revoked key %s (%s) at %s\n", k.ID, cell(k.Name, 0), cell(k.RevokedAt, 0))
			return err
		})
	})
	return cmd
}
