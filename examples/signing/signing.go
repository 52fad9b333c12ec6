// Package signing is Herald's correlated-lane example: workflows that wait
// for a document to be signed, knowing only the document id, while the
// signing service's webhook knows the document id but no workflow instance.
// One webhook put reaches every instance waiting on that document.
package signing

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldwf/herald"
)

// Request starts a party's signing workflow.
type Request struct {
	Party    string          `json:"party"`
	Document string          `json:"document"`
	Deadline herald.Duration `json:"deadline"`
}

// Signed is the payload the webhook puts under the document id.
type Signed struct {
	Document string `json:"document"`
	SignedBy string `json:"signed_by"`
}

// DocumentSigned is the event definition the webhook and the waits share.
const DocumentSigned = "document-signed"

// Onboard sends the document to a party, then waits — up to a deadline — for
// the correlated event "document-signed" under the document id. It does not
// matter whether the webhook fires before or after the wait.
func Onboard(ctx *herald.Context, req Request) (string, error) {
	if err := ctx.CallActivity("send-document", req).Get(nil); err != nil {
		return "", err
	}
	var s Signed
	err := ctx.WaitCorrelated(DocumentSigned, req.Document, herald.WithTimeout(time.Duration(req.Deadline))).Get(&s)
	if err != nil {
		return "", fmt.Errorf("%s: %w", req.Party, err)
	}
	return fmt.Sprintf("%s onboarded: %s signed by %s", req.Party, s.Document, s.SignedBy), nil
}

// Register registers the workflow and its activity.
func Register(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "onboard", Onboard)
	herald.RegisterActivity(rt, "send-document", func(ctx context.Context, req Request) (string, error) {
		return "sent " + req.Document + " to " + req.Party, nil
	})
}
