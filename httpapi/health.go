package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/heraldwf/herald/httpapi/wire"
)

// readyTimeout bounds a readiness check.
const readyTimeout = 2 * time.Second

// healthRoutes: liveness, readiness and the OpenAPI document; no key.
func (a *API) healthRoutes() []*route {
	return []*route{
		{
			method: "GET", path: "/healthz", op: "health", tag: "health",
			summary: "The process is alive", access: public, resp: wire.Health{},
			handle: func(c *call) (any, error) { return wire.Health{Status: "ok"}, nil },
		},
		{
			method: "GET", path: "/readyz", op: "ready", tag: "health",
			summary: "The store is reachable and migrated", access: public, resp: wire.Health{},
			errs: []string{"not_ready"}, raw: true,
			handle: func(c *call) (any, error) {
				if a.ready != nil {
					ctx, cancel := context.WithTimeout(c.r.Context(), readyTimeout)
					defer cancel()
					if err := a.ready(ctx); err != nil {
						writeJSON(c.w, http.StatusServiceUnavailable, wire.Health{Status: "not ready", Detail: err.Error()})
						return nil, nil
					}
				}
				writeJSON(c.w, http.StatusOK, wire.Health{Status: "ok"})
				return nil, nil
			},
		},
		{
			method: "GET", path: "/v1/openapi.json", op: "openapi", tag: "health",
			summary: "This API's OpenAPI 3.1 document", access: public, raw: true,
			handle: func(c *call) (any, error) {
				c.w.Header().Set("Content-Type", "application/json")
				c.w.Write(a.openAPIDoc())
				return nil, nil
			},
		},
	}
}
