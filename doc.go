// Package herald is a durable-workflow engine whose centre is external
// events. Workflows are deterministic Go functions replayed from history;
// events reach them on defined lanes, in a defined order, and every event has
// a fate you can query.
//
// A Runtime runs registered workflows and activities against a
// storage.Store (SQLite embedded, see storage/sqlite); a Client starts
// instances, raises events and reads state. Both are bound to one tenant.
package herald
