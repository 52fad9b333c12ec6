package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/httpapi/wire"
)

// The OpenAPI 3.1 document is built from the route table, so every route
// served is documented and every documented route is served; schemas are
// reflected from the wire types (JSON Schema 2020-12, which OpenAPI 3.1
// uses).

var openAPI struct {
	once sync.Once
	doc  []byte
}

// openAPIDoc returns the document, built once per process (the route table
// is the same for every API).
func (a *API) openAPIDoc() []byte {
	openAPI.once.Do(func() { openAPI.doc = buildOpenAPI(a.routes) })
	return openAPI.doc
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	durationType   = reflect.TypeFor[heraldtype.Duration]()
	timeDuration   = reflect.TypeFor[time.Duration]()
	pkgPath        = regexp.MustCompile(`[\w./-]*\.`)
)

// schemaName names a type in components/schemas: Page[*heraldtype.X]
// becomes PageOfX.
func schemaName(t reflect.Type) string {
	n := pkgPath.ReplaceAllString(t.Name(), "")
	n = strings.NewReplacer("[", "Of", "]", "", "*", "", ",", "And").Replace(n)
	return n
}

func buildOpenAPI(routes []*route) []byte {
	r := &jsonschema.Reflector{
		Anonymous: true,
		Namer:     schemaName,
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			switch t {
			case rawMessageType:
				return &jsonschema.Schema{Description: "any JSON value"}
			case durationType, timeDuration:
				return &jsonschema.Schema{Type: "string", Description: `Go duration, e.g. "1h30m"`, Examples: []any{"1h30m"}}
			}
			return nil
		},
	}
	schemas := map[string]any{}
	ref := func(v any) map[string]any {
		s := r.Reflect(v)
		for name, d := range s.Definitions {
			schemas[name] = d
		}
		if s.Ref != "" {
			return map[string]any{"$ref": s.Ref}
		}
		if _, ok := s.Definitions[schemaName(reflect.TypeOf(v))]; ok {
			return map[string]any{"$ref": "#/$defs/" + schemaName(reflect.TypeOf(v))}
		}
		// A type the Mapper answers (json.RawMessage: any JSON value) has no
		// definition to point at: its schema goes inline, without the
		// $schema a top-level reflection carries.
		s.Version = ""
		b, err := json.Marshal(s)
		if err != nil {
			panic("httpapi: a schema does not encode: " + err.Error())
		}
		var inline map[string]any
		_ = json.Unmarshal(b, &inline)
		return inline
	}
	problem := map[string]any{"content": map[string]any{
		"application/problem+json": map[string]any{"schema": ref(wire.Problem{})},
	}}

	paths := map[string]map[string]any{}
	for _, rt := range routes {
		op := map[string]any{
			"operationId": rt.op,
			"summary":     rt.summary,
			"tags":        []string{rt.tag},
		}
		if rt.access == public {
			op["security"] = []any{}
		}
		if rt.access == adminOnly {
			op["description"] = "Needs an admin key."
		}
		var params []any
		if rt.access == tenantScoped {
			params = append(params, map[string]any{
				"name": TenantHeader, "in": "header",
				"description": "the tenant an admin key acts on (default \"default\"); a tenant key may only name its own",
				"schema":      map[string]any{"type": "string"},
			})
		}
		for _, p := range rt.params {
			typ := p.typ
			if typ == "" {
				typ = "string"
			}
			params = append(params, map[string]any{
				"name": p.name, "in": p.in, "required": p.required || p.in == "path",
				"description": p.doc, "schema": map[string]any{"type": typ},
			})
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.body != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": ref(rt.body)},
			}}
		}
		responses := map[string]any{}
		status := rt.status
		switch {
		case rt.resp != nil:
			if status == 0 {
				status = http.StatusOK
			}
			responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status),
				"content": map[string]any{"application/json": map[string]any{"schema": ref(rt.resp)}}}
		case rt.op == "openapi":
			responses["200"] = map[string]any{"description": "the OpenAPI document",
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
		default:
			if status == 0 {
				status = http.StatusNoContent
			}
			responses[strconv.Itoa(status)] = map[string]any{"description": http.StatusText(status)}
		}
		for _, code := range routeErrors(rt) {
			st := strconv.Itoa(codeStatus(code))
			desc := code
			if prev, ok := responses[st].(map[string]any); ok {
				desc = prev["description"].(string) + ", " + code
			}
			resp := map[string]any{"description": desc}
			for k, v := range problem {
				resp[k] = v
			}
			responses[st] = resp
		}
		op["responses"] = responses
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Herald HTTP API",
			"version":     "v1",
			"description": "Durable workflows whose centre is external events. Errors are RFC 9457 problem documents; see the code field.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "an API key"},
			},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic("httpapi: the OpenAPI document does not encode: " + err.Error())
	}
	return bytes.ReplaceAll(b, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`))
}

// routeErrors are the problem codes a route can answer: its own and those
// of every route of its access.
func routeErrors(rt *route) []string {
	codes := slices.Clone(rt.errs)
	if rt.body != nil {
		codes = append(codes, probBadRequest.code, probTooLarge.code, probMediaType.code)
	}
	if rt.access != public {
		codes = append(codes, probUnauthorized.code, probForbidden.code, "unavailable")
	}
	if rt.op != "health" && rt.op != "openapi" {
		codes = append(codes, probInternal.code)
	}
	slices.Sort(codes)
	return slices.Compact(codes)
}

// codeStatus is the HTTP status of a problem code.
func codeStatus(code string) int {
	for _, row := range problemTable {
		if row.kind.code == code {
			return row.kind.status
		}
	}
	for _, k := range ownProblems {
		if k.code == code {
			return k.status
		}
	}
	if code == "not_ready" {
		return http.StatusServiceUnavailable
	}
	panic("httpapi: a route documents the unknown problem code " + code)
}
