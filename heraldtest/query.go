package heraldtest

// Query asks instance id's workflow the query name with args (nil for
// none) and decodes the answer into out (Client.Query: the state replayed
// from history, nothing written). It returns Query's error, so a test can
// check a refusal; RequireQuery fails the test instead.
func (e *Env) Query(id, name string, args, out any) error {
	return e.client.Query(e.ctx, id, name, args, out)
}
