package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/storage"
)

// access is who may call a route.
type access int

const (
	// public routes need no key (health, readiness, the OpenAPI document).
	public access = iota
	// tenant routes act on one tenant: a tenant key's own, or the one an
	// admin key names in the Herald-Tenant header ("default" if none).
	tenantScoped
	// admin routes need an admin key.
	adminOnly
)

// TenantHeader names the tenant an admin key acts on. A tenant key may
// send it only with its own tenant.
const TenantHeader = "Herald-Tenant"

// param documents a path or query parameter.
type param struct {
	name, in, doc string
	// typ is the JSON Schema type: "string" (default), "integer",
	// "boolean".
	typ      string
	required bool
}

// route is one row of the route table: what the mux serves and what the
// OpenAPI document says. Every route is registered through it, so the
// document cannot miss one.
type route struct {
	method  string // GET, POST, PUT, PATCH, DELETE
	path    string // ServeMux pattern path, e.g. /v1/instances/{id}
	op      string // OpenAPI operationId, e.g. getInstance
	tag     string // OpenAPI tag, e.g. instances
	summary string
	access  access
	params  []param
	// body is a zero value of the request body's type (nil: no body).
	body any
	// resp is a zero value of the success body's type (nil: no body,
	// status 204).
	resp any
	// status is the success status; 0 means 200, or 204 without resp.
	status int
	// errs are the problem codes the route documents, beyond those every
	// route of its access can answer (bad_request, unauthorized,
	// forbidden, internal …).
	errs []string
	// handle serves the request. It returns the success body, or an error
	// the problem table turns into a problem document.
	handle func(c *call) (any, error)
	// raw routes write their own answer (handle returns nil, nil after
	// writing).
	raw bool
}

// call is one request being served.
type call struct {
	api    *API
	w      http.ResponseWriter
	r      *http.Request
	who    *principal // nil on public routes
	tenant string     // the tenant a tenant-scoped route acts on
	client *herald.Client
}

// register adds every route to the mux.
func (a *API) register() {
	a.routes = a.routeTable()
	for _, rt := range a.routes {
		a.mux.Handle(rt.method+" "+rt.path, a.serveRoute(rt))
	}
	// Anything else under /v1 (or elsewhere) answers with a problem
	// document, not the mux's plain-text 404.
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := a.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			a.writeProblem(w, r, newProblem(probMethod, r.Method+" is not allowed on "+r.URL.Path, r))
			return
		}
		a.writeProblem(w, r, newProblem(probRouteNotFound, r.Method+" "+r.URL.Path+" is not a route of this API", r))
	})
}

// allowed returns the methods the mux serves r's path with (none: the path
// is no route's).
func (a *API) allowed(r *http.Request) []string {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// routeTable lists every route; each group of routes lives in its own file.
func (a *API) routeTable() []*route {
	var rs []*route
	rs = append(rs, a.healthRoutes()...)
	rs = append(rs, a.instanceRoutes()...)
	rs = append(rs, a.queryRoutes()...)
	rs = append(rs, a.eventRoutes()...)
	rs = append(rs, a.correlatedRoutes()...)
	rs = append(rs, a.definitionRoutes()...)
	rs = append(rs, a.adminRoutes()...)
	rs = append(rs, a.busRoutes()...)
	return rs
}

// serveRoute is the adapter from a route to an http.Handler: it
// authenticates, resolves the tenant, runs the route and writes its answer.
func (a *API) serveRoute(rt *route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{api: a, w: w, r: r}
		if rt.access != public {
			who, kind, detail := a.auth.authenticate(r)
			if who == nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
				a.writeProblem(w, r, newProblem(kind, detail, r))
				return
			}
			c.who = who
			setAccessKey(r.Context(), who.keyID)
			if rt.access == adminOnly && !who.admin {
				a.writeProblem(w, r, newProblem(probForbidden, "this route needs an admin key", r))
				return
			}
			if rt.access == tenantScoped {
				tenant, ok := who.tenantFor(r.Header.Get(TenantHeader))
				if !ok {
					a.writeProblem(w, r, newProblem(probForbidden, "this key may not act on the tenant named in "+TenantHeader, r))
					return
				}
				cl, err := a.rt.Client(tenant)
				if err != nil {
					a.writeError(w, r, err)
					return
				}
				c.tenant, c.client = tenant, cl
				setAccessTenant(r.Context(), tenant)
			}
		}
		out, err := rt.handle(c)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if rt.raw {
			return
		}
		status := rt.status
		if out == nil {
			if status == 0 {
				status = http.StatusNoContent
			}
			w.WriteHeader(status)
			return
		}
		if status == 0 {
			status = http.StatusOK
		}
		writeJSON(w, status, out)
	})
}

// writeJSON writes v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeProblem writes p as an application/problem+json answer.
func (a *API) writeProblem(w http.ResponseWriter, r *http.Request, p *wire.Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}

// writeError writes err as a problem: a requestError as itself, a Herald
// error through the problem table; anything else is a 500 whose detail is
// logged, not shown.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var re *requestError
	if errors.As(err, &re) {
		p := newProblem(re.kind, re.detail, r)
		p.Reasons = re.reasons
		a.writeProblem(w, r, p)
		return
	}
	kind, ok := problemFor(err)
	if !ok {
		a.logger.ErrorContext(r.Context(), "herald api: internal error", "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(r.Context()), "err", err)
		a.writeProblem(w, r, newProblem(kind, "", r))
		return
	}
	// A store failure is answered in Herald's words (storage.ErrorText);
	// the driver's text is for the operator.
	if storage.StoreFailure(err) != "" {
		a.logger.WarnContext(r.Context(), "herald api: store failure", "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(r.Context()), "err", err)
	}
	p := newProblem(kind, storage.ErrorText(err), r)
	p.Reasons = problemReasons(err)
	a.writeProblem(w, r, p)
}

// requestError is a problem found by the API itself (a body that is not
// JSON, a bad query parameter) rather than by the engine.
type requestError struct {
	kind    problemKind
	detail  string
	reasons []string
}

func (e *requestError) Error() string { return e.kind.code + ": " + e.detail }

// badRequest returns a 400 invalid_argument problem with detail.
func badRequest(format string, args ...any) error {
	return &requestError{kind: problemKind{http.StatusBadRequest, "invalid_argument", "Invalid argument"}, detail: fmt.Sprintf(format, args...)}
}

// bind decodes the request body into v: it must be application/json (or
// have no Content-Type), at most the body cap, one JSON value, with no
// unknown fields and no object member named twice (at any depth).
func (c *call) bind(v any) error {
	if ct := c.r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/problem+json") {
			return &requestError{kind: probMediaType, detail: "Content-Type " + strconv.Quote(ct) +
				" is not application/json (with curl: --json, or -H 'Content-Type: application/json')"}
		}
	}
	raw, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, c.api.maxBody))
	if err != nil {
		return decodeError(err, c.api.maxBody)
	}
	// encoding/json would turn invalid UTF-8 into U+FFFD silently: the
	// engine would store, and answer with, text the client never sent.
	if !utf8.Valid(raw) {
		return &requestError{kind: probBadRequest, detail: "the body is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, c.api.maxBody)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return decodeError(err, c.api.maxBody)
		}
		return &requestError{kind: probBadRequest, detail: "the body holds more than one JSON value"}
	}
	// encoding/json takes the last of a repeated member: the engine would
	// act on, and store, a value other readers of the same body (a proxy's
	// check, a payload's consumer) may take the first of.
	if path, key, dup := duplicateMember(raw); dup {
		return &requestError{kind: probBadRequest, detail: fmt.Sprintf("the body has the member %q twice in %s", key, path)}
	}
	return nil
}

// duplicateMember finds the first object member name that occurs twice in
// one object of raw, a valid JSON text, and returns the path of that object
// ("$", "$.payload", "$.items[2]"). Names compare as decoded, so "a" and
// "\u0061" are the same member.
func duplicateMember(raw []byte) (path, key string, dup bool) {
	type frame struct {
		path    string
		names   map[string]bool // nil in an array
		name    bool            // an object whose next token is a member name
		last    string          // an object's member being read
		element int             // an array's next element
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a number no float64 holds is still a token
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", "", false
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		here := "$"
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.names != nil && top.name {
				name := tok.(string)
				if top.names[name] {
					return top.path, name, true
				}
				top.names[name], top.name, top.last = true, false, name
				continue
			}
			if top.names != nil {
				top.name = true
				here = top.path + memberPath(top.last)
			} else {
				here = top.path + "[" + strconv.Itoa(top.element) + "]"
				top.element++
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{path: here, names: map[string]bool{}, name: true})
		case json.Delim('['):
			stack = append(stack, &frame{path: here})
		}
	}
}

// memberPath is the path step to an object's member name: .name, or
// ["name"] for a name that is not a plain identifier.
func memberPath(name string) string {
	for i, r := range name {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return "[" + strconv.Quote(name) + "]"
		}
	}
	if name == "" {
		return `[""]`
	}
	return "." + name
}

// decodeError turns a JSON decoding error into a typed request error.
func decodeError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return &requestError{kind: probTooLarge, detail: fmt.Sprintf("the body is over the %d-byte cap", limit)}
	case errors.Is(err, io.EOF):
		return &requestError{kind: probBadRequest, detail: "the body is empty; a JSON object is expected"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &requestError{kind: probBadRequest, detail: "the body ends inside a JSON value"}
	case errors.As(err, &se):
		return &requestError{kind: probBadRequest, detail: fmt.Sprintf("the body is not JSON (at byte %d): %v", se.Offset, se)}
	case errors.As(err, &te):
		return &requestError{kind: probBadRequest, detail: fmt.Sprintf("field %q must be %s, not JSON %s", te.Field, te.Type, te.Value)}
	default:
		// Unknown fields and the like: encoding/json's message names the
		// field.
		return &requestError{kind: probBadRequest, detail: "the body cannot be read: " + err.Error()}
	}
}

// Paging.
const (
	// DefaultPageLimit is a list's page size when the request names none.
	DefaultPageLimit = 100
	// MaxPageLimit is the largest page a request may ask for (the
	// engine's MaxListLimit).
	MaxPageLimit = herald.MaxListLimit
)

// pageParams are the documented paging parameters of every list route.
var pageParams = []param{
	{name: "limit", in: "query", typ: "integer", doc: "page size, 1–1000 (default 100)"},
	{name: "cursor", in: "query", doc: "next_cursor of the previous page"},
}

// page reads the limit and cursor query parameters.
func (c *call) page() (limit int, cursor string, err error) {
	q := c.r.URL.Query()
	limit = DefaultPageLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageLimit {
			return 0, "", badRequest("limit %q must be an integer from 1 to %d", s, MaxPageLimit)
		}
		limit = n
	}
	return limit, q.Get("cursor"), nil
}
