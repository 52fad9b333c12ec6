package httpapi

import (
	"errors"
	"strconv"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// Bus scripts: versions, syntax checks and dry runs.

func (a *API) scriptRoutes() []*route {
	idParam := param{name: "id", in: "path", required: true, doc: "script id"}
	return []*route{
		{
			method: "PUT", path: "/v1/scripts/{id}", op: "putScript", tag: "bus",
			summary: "Save a new version of a script (version 1 for a new id); a syntax error is refused with its position",
			access:  tenantScoped, params: []param{idParam}, body: wire.PutScriptRequest{}, resp: wire.Script{},
			errs: []string{"invalid_argument", "script_syntax"},
			handle: func(c *call) (any, error) {
				var req wire.PutScriptRequest
				if err := c.bind(&req); err != nil {
					return nil, err
				}
				return c.client.PutScript(c.r.Context(), c.r.PathValue("id"), req.Source)
			},
		},
		{
			method: "GET", path: "/v1/scripts/{id}", op: "getScript", tag: "bus",
			summary: "Get a script's latest version, or the one ?version names", access: tenantScoped,
			params: []param{idParam, {name: "version", in: "query", typ: "integer", doc: "a version (default: the latest)"}},
			resp:   wire.Script{}, errs: []string{"invalid_argument", "not_found"},
			handle: func(c *call) (any, error) {
				version := 0
				if s := c.r.URL.Query().Get("version"); s != "" {
					n, err := strconv.Atoi(s)
					if err != nil || n < 1 {
						return nil, badRequest("version %.64q must be a positive integer", s)
					}
					version = n
				}
				return c.client.Script(c.r.Context(), c.r.PathValue("id"), version)
			},
		},
		{
			method: "GET", path: "/v1/scripts", op: "listScripts", tag: "bus",
			summary: "List the tenant's scripts (latest versions, without source), ordered by id",
			access:  tenantScoped, params: pageParams, resp: wire.Page[*wire.ScriptInfo]{}, errs: []string{"invalid_argument"},
			handle: func(c *call) (any, error) {
				limit, cursor, err := c.page()
				if err != nil {
					return nil, err
				}
				scripts, err := c.client.Scripts(c.r.Context())
				if err != nil {
					return nil, err
				}
				infos := make([]*wire.ScriptInfo, len(scripts))
				for i, s := range scripts {
					infos[i] = &wire.ScriptInfo{ID: s.ID, Version: s.Version, Size: len(s.Source), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
				}
				items, next := pageByID(infos, func(s *wire.ScriptInfo) string { return s.ID }, limit, cursor)
				return wire.Page[*wire.ScriptInfo]{Items: items, NextCursor: next}, nil
			},
		},
		{
			method: "DELETE", path: "/v1/scripts/{id}", op: "deleteScript", tag: "bus",
			summary: "Delete every version of a script (subscriptions still naming it then dead-letter, kind permission)",
			access:  tenantScoped, params: []param{idParam}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return nil, c.client.DeleteScript(c.r.Context(), c.r.PathValue("id"))
			},
		},
		{
			method: "POST", path: "/v1/scripts/validate", op: "validateScript", tag: "bus",
			summary: "Check a script's syntax: ok, or the syntax error's line, column and message; stores nothing",
			access:  tenantScoped, body: wire.ValidateScriptRequest{}, resp: wire.ValidateScriptResponse{},
			errs: []string{"invalid_argument"},
			handle: func(c *call) (any, error) {
				var req wire.ValidateScriptRequest
				if err := c.bind(&req); err != nil {
					return nil, err
				}
				err := herald.ValidateScript(req.Source)
				var se *herald.ScriptSyntaxError
				switch {
				case err == nil:
					return wire.ValidateScriptResponse{OK: true}, nil
				case errors.As(err, &se):
					return wire.ValidateScriptResponse{SyntaxError: &wire.ScriptSyntaxError{
						Line: se.Err.Line, Column: se.Err.Column, Message: se.Err.Message}}, nil
				}
				return nil, err
			},
		},
		{
			method: "POST", path: "/v1/scripts/test", op: "testScript", tag: "bus",
			summary: "Dry-run a script (source, or a stored script) on a sample event in the bus's sandbox " +
				"(child process, memory cap, timeout): its result, logs, or error with stack; stores nothing",
			access: tenantScoped, body: wire.TestScriptRequest{}, resp: wire.TestScriptResponse{},
			errs:   []string{"invalid_argument", "script_syntax", "not_found", "timeout"},
			handle: a.testScript,
		},
	}
}

func (a *API) testScript(c *call) (any, error) {
	var req wire.TestScriptRequest
	if err := c.bind(&req); err != nil {
		return nil, err
	}
	ctx := c.r.Context()
	t := herald.ScriptTest{Source: req.Source, Timeout: time.Duration(req.Timeout),
		Event: herald.BusEvent{ID: req.Event.ID, Type: req.Event.Type, Data: req.Event.Data, Timestamp: req.Event.Timestamp}}
	switch {
	case req.Source != "" && req.Script != "":
		return nil, badRequest("name either source or script, not both")
	case req.Script != "":
		if req.Version < 0 {
			return nil, badRequest("version %d must not be negative", req.Version)
		}
		s, err := c.client.Script(ctx, req.Script, req.Version)
		if err != nil {
			return nil, err
		}
		t.Name, t.Source = s.ID, s.Source
	case req.Source == "":
		return nil, badRequest("name a source or a stored script")
	case req.Version != 0:
		return nil, badRequest("version applies to a stored script only")
	}
	res, err := a.rt.TestScript(ctx, c.tenant, t)
	if err != nil {
		return nil, err
	}
	return wire.TestScriptResponse{Succeeded: res.Succeeded, Result: res.Result, Logs: res.Logs,
		ErrorKind: string(res.ErrorKind), Error: res.Error, Stack: res.Stack, Duration: res.Duration}, nil
}
