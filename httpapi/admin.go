package httpapi

import (
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/storage"
)

// adminRoutes: tenants, their limits, and API keys; admin keys only.
func (a *API) adminRoutes() []*route {
	tenantParam := []param{{name: "tenant", in: "path", required: true, doc: "tenant id"}}
	return []*route{
		{
			method: "GET", path: "/v1/tenants", op: "listTenants", tag: "admin",
			summary: "List registered tenants with their limit overrides", access: adminOnly,
			resp: wire.Page[*wire.Tenant]{},
			handle: func(c *call) (any, error) {
				ts, err := a.rt.Tenants(c.r.Context())
				if err != nil {
					return nil, err
				}
				return wire.Page[*wire.Tenant]{Items: nonNil(ts)}, nil
			},
		},
		{
			method: "GET", path: "/v1/tenants/{tenant}", op: "getTenant", tag: "admin",
			summary: "Get a tenant's limit overrides", access: adminOnly, params: tenantParam,
			resp: wire.Tenant{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return a.rt.Tenant(c.r.Context(), c.r.PathValue("tenant"))
			},
		},
		{
			method: "PUT", path: "/v1/tenants/{tenant}", op: "putTenant", tag: "admin",
			summary: "Register a tenant and set its limit overrides (zero fields: the engine's)", access: adminOnly,
			params: tenantParam, body: wire.Limits{}, resp: wire.Tenant{}, errs: []string{"invalid_argument"},
			handle: func(c *call) (any, error) {
				var l wire.Limits
				if err := c.bind(&l); err != nil {
					return nil, err
				}
				return a.rt.SetTenantLimits(c.r.Context(), c.r.PathValue("tenant"), l)
			},
		},
		{
			method: "POST", path: "/v1/keys", op: "createKey", tag: "admin",
			summary: "Create an API key; its secret is in this answer only", access: adminOnly,
			body: wire.CreateKeyRequest{}, resp: wire.CreateKeyResponse{}, status: 201,
			errs: []string{"invalid_argument"},
			handle: func(c *call) (any, error) {
				var req wire.CreateKeyRequest
				if err := c.bind(&req); err != nil {
					return nil, err
				}
				if !req.Admin {
					// A key's tenant is registered with it, so that it
					// appears in the tenant list at once.
					if err := a.rt.EnsureTenant(c.r.Context(), req.Tenant); err != nil {
						return nil, err
					}
				}
				k, secret, err := CreateKey(c.r.Context(), a.keys, req.Tenant, req.Admin, req.Name, a.now())
				if err != nil {
					return nil, err
				}
				return wire.CreateKeyResponse{Key: *k, Secret: secret}, nil
			},
		},
		{
			method: "GET", path: "/v1/keys", op: "listKeys", tag: "admin",
			summary: "List API keys (never their secrets)", access: adminOnly,
			params: []param{
				{name: "tenant", in: "query", doc: "only this tenant's keys"},
				{name: "include_revoked", in: "query", typ: "boolean", doc: "list revoked keys too"},
			},
			resp: wire.Page[*wire.APIKey]{},
			handle: func(c *call) (any, error) {
				q := c.r.URL.Query()
				ks, err := a.keys.KeyList(c.r.Context(), &storage.KeyListParams{
					Tenant: q.Get("tenant"), IncludeRevoked: q.Get("include_revoked") == "true",
				})
				if err != nil {
					return nil, err
				}
				return wire.Page[*heraldtype.APIKey]{Items: nonNil(ks)}, nil
			},
		},
		{
			method: "DELETE", path: "/v1/keys/{id}", op: "revokeKey", tag: "admin",
			summary: "Revoke an API key (it authenticates nothing from now on)", access: adminOnly,
			params: []param{{name: "id", in: "path", required: true, doc: "key id"}},
			resp:   wire.APIKey{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return a.keys.KeyRevoke(c.r.Context(), &storage.KeyRevokeParams{ID: c.r.PathValue("id"), Now: a.now().UTC()})
			},
		},
	}
}
