// Package wire holds the JSON shapes of Herald's HTTP API (/v1): requests,
// responses, pages and problems. The server (package httpapi) and the Go
// client (package httpapi/client) both speak it; it imports nothing of
// Herald but the leaf packages heraldtype and history.
//
// Conventions: field names are snake_case; durations are Go duration
// strings ("1h30m", heraldtype.Duration); times are RFC 3339; payloads are
// JSON values carried as they were sent. Where a domain type's JSON is
// already the wire form (heraldtype.InstanceInfo, EventRecord, …) the wire
// name is an alias of it, so the two cannot drift apart; every request and
// page is the API's own.
package wire

import (
	"encoding/json"

	"github.com/heraldwf/herald/heraldtype"
)

// Problem is an RFC 9457 problem detail (media type
// application/problem+json), the body of every error answer.
type Problem struct {
	// Type is a URI naming the problem: "https://herald.dev/problems/" +
	// Code.
	Type string `json:"type"`
	// Title is a short, human summary of the problem type.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Code is the stable, machine-readable code (one per sentinel error;
	// see the httpapi package's problem table).
	Code string `json:"code"`
	// Reasons lists every reason an argument was refused, when there are
	// several.
	Reasons []string `json:"reasons,omitempty"`
	// RequestID identifies the request in the server's logs.
	RequestID string `json:"request_id,omitempty"`
}

// ProblemTypeBase prefixes a problem's Code in its Type.
const ProblemTypeBase = "https://herald.dev/problems/"

// Page is one page of a list. NextCursor, when not empty, is passed as the
// cursor query parameter to get the next page.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Aliases of the domain types whose JSON is the wire form.
type (
	Instance = heraldtype.InstanceInfo
	Tenant   = heraldtype.Tenant
	Limits   = heraldtype.TenantLimits
	APIKey   = heraldtype.APIKey
)

// StartInstanceRequest starts a workflow instance (POST /v1/instances).
type StartInstanceRequest struct {
	// Workflow is the registered workflow's name.
	Workflow string `json:"workflow"`
	// ID is the instance id; empty lets Herald choose one.
	ID string `json:"id,omitempty"`
	// Input is the workflow's input (any JSON value).
	Input json.RawMessage `json:"input,omitempty"`
	// IDReuse is what to do when ID is taken: "fail" (the default; 409
	// instance_exists) or "use_existing" (answer with the existing
	// instance, if it runs the same workflow).
	IDReuse string `json:"id_reuse,omitempty"`
}

// StartInstanceResponse is the started (or reused) instance's id.
type StartInstanceResponse struct {
	ID string `json:"id"`
}

// CreateKeyRequest creates an API key (POST /v1/keys, admin only).
type CreateKeyRequest struct {
	// Tenant the key reaches; empty with Admin true.
	Tenant string `json:"tenant,omitempty"`
	// Admin makes an admin key.
	Admin bool `json:"admin,omitempty"`
	// Name labels the key.
	Name string `json:"name"`
}

// CreateKeyResponse is the new key; Secret is shown this once and never
// again (only its hash is stored).
type CreateKeyResponse struct {
	Key    APIKey `json:"key"`
	Secret string `json:"secret"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}
