package client

import (
	"context"
	"net/url"

	"github.com/heraldwf/herald/httpapi/wire"
)

// CreateKey creates an API key (admin key needed); the answer's Secret is
// shown this once.
func (c *Client) CreateKey(ctx context.Context, req wire.CreateKeyRequest) (*wire.CreateKeyResponse, error) {
	var out wire.CreateKeyResponse
	if err := c.Do(ctx, "POST", "/v1/keys", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Keys lists API keys (of tenant, if not empty).
func (c *Client) Keys(ctx context.Context, tenant string, includeRevoked bool) ([]*wire.APIKey, error) {
	q := url.Values{}
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	if includeRevoked {
		q.Set("include_revoked", "true")
	}
	var out wire.Page[*wire.APIKey]
	if err := c.Do(ctx, "GET", "/v1/keys", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// RevokeKey revokes the key with id.
func (c *Client) RevokeKey(ctx context.Context, id string) (*wire.APIKey, error) {
	var out wire.APIKey
	if err := c.Do(ctx, "DELETE", "/v1/keys/"+esc(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tenants lists registered tenants.
func (c *Client) Tenants(ctx context.Context) ([]*wire.Tenant, error) {
	var out wire.Page[*wire.Tenant]
	if err := c.Do(ctx, "GET", "/v1/tenants", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// TenantInfo returns a registered tenant.
func (c *Client) TenantInfo(ctx context.Context, tenant string) (*wire.Tenant, error) {
	var out wire.Tenant
	if err := c.Do(ctx, "GET", "/v1/tenants/"+esc(tenant), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutTenant registers tenant and sets its limit overrides.
func (c *Client) PutTenant(ctx context.Context, tenant string, limits wire.Limits) (*wire.Tenant, error) {
	var out wire.Tenant
	if err := c.Do(ctx, "PUT", "/v1/tenants/"+esc(tenant), nil, limits, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
