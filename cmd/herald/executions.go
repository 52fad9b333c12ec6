package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() { addCommand((*app).executionsCommand) }

// executionsCommand is `herald executions`: the attempt records of the
// event bus's executions.
func (a *app) executionsCommand() *cobra.Command {
	return group("executions", "list the attempts of event-bus executions", a.executionsList())
}

func (a *app) executionsList() *cobra.Command {
	var f client.AttemptFilter
	cmd := &cobra.Command{
		Use:   "list (--event EVENT_ID | --subscription ID | --execution N)…",
		Short: "list attempt records, oldest first: their outcome, result or error",
		Example: `  herald executions list --event order-o-1-paid
  herald executions list --subscription audit --all`,
		Args: exactArgs(),
	}
	pf := addPageFlags(cmd)
	cmd.Flags().StringVar(&f.EventID, "event", "", "only attempts for this published event")
	cmd.Flags().StringVar(&f.Subscription, "subscription", "", "only attempts of this subscription")
	cmd.Flags().Int64Var(&f.Execution, "execution", 0, "only attempts of this execution")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		if f.EventID == "" && f.Subscription == "" && f.Execution == 0 {
			return usageErrorf(cmd, "executions list needs --event, --subscription or --execution")
		}
		page, err := fetchPages(cmd.Context(), a, "attempts", pf, func(ctx ctxT, limit int, cursor string) (*wire.Page[*wire.Attempt], error) {
			f := f
			f.Limit, f.Cursor = limit, cursor
			return c.Attempts(ctx, f)
		})
		if err != nil {
			return err
		}
		return emitPage(a, page, []string{"EXECUTION", "ATTEMPT", "EVENT", "SUBSCRIPTION", "OUTCOME", "STARTED", "DURATION", "RESULT OR ERROR"},
			func(at *wire.Attempt) []any {
				outcome, detail := "succeeded", any(at.Result)
				if !at.Succeeded {
					outcome, detail = "failed: "+string(at.ErrorKind), at.Error
				}
				return []any{at.Execution, at.Number, at.EventID, at.Subscription, outcome, at.StartedAt,
					time.Duration(at.Duration), detail}
			})
	})
	return cmd
}
