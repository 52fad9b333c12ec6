// Package client is the Go client of Herald's HTTP API (package httpapi);
// the herald CLI uses it. Requests and answers are the types of package
// wire; an error answer comes back as an *Error holding the problem
// document.
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("HERALD_API_KEY"))
//	id, err := c.StartInstance(ctx, wire.StartInstanceRequest{Workflow: "approval", Input: in})
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldwf/herald/httpapi/wire"
)

// Client calls one Herald server with one API key.
type Client struct {
	base   *url.URL
	key    string
	tenant string
	hc     *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithTenant names the tenant an admin key acts on (the Herald-Tenant
// header). A tenant key may only name its own.
func WithTenant(tenant string) Option { return func(c *Client) { c.tenant = tenant } }

// WithHTTPClient replaces the HTTP client (default: one with a 60 s
// timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the server at base (e.g.
// "http://127.0.0.1:8080") using apiKey.
func New(base, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("herald client: server %q is not an http(s) URL", base)
	}
	c := &Client{base: u, key: apiKey, hc: &http.Client{Timeout: 60 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Tenant returns a copy of c acting on tenant.
func (c *Client) Tenant(tenant string) *Client {
	cp := *c
	cp.tenant = tenant
	return &cp
}

// Error is an error answer of the API: its problem document.
type Error struct {
	wire.Problem
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("herald: %d %s", e.Status, e.Code)
	if e.Detail != "" {
		msg += ": " + e.Detail
	} else if e.Title != "" {
		msg += ": " + e.Title
	}
	return msg
}

// Code returns the problem code of err ("not_found", "unauthorized" …),
// or "" if err is not an API error answer.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Do sends a request to path (under the server's base, e.g.
// "/v1/instances") with query and body (encoded as JSON; nil: none) and
// decodes a success answer into out (nil: discarded). An error answer is an
// *Error; a transport failure is returned as is.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := *c.base
	// path is escaped (esc): an id's "/" or "%" travels as %2F, %25.
	raw := c.base.EscapedPath() + path
	p, err := url.PathUnescape(raw)
	if err != nil {
		return fmt.Errorf("herald client: path %q: %w", path, err)
	}
	u.Path, u.RawPath = p, raw
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("herald client: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.tenant != "" {
		req.Header.Set("Herald-Tenant", c.tenant)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &Error{}
		if json.Unmarshal(b, &e.Problem) != nil || e.Code == "" {
			e.Problem = wire.Problem{Status: resp.StatusCode, Code: "http_" + fmt.Sprint(resp.StatusCode),
				Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(b))}
		}
		e.Status = resp.StatusCode
		return e
	}
	if out == nil {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("herald client: decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

// pageQuery adds paging parameters to q.
func pageQuery(q url.Values, limit int, cursor string) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}
