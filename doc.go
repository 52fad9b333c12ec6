// Package herald is a durable-workflow engine whose centre is external
// events. Workflows are deterministic Go functions replayed from history;
// events reach them on defined lanes, in a defined order, and every event has
// a fate you can query.
//
// A Runtime runs registered workflows and activities against a
// storage.Store (SQLite embedded, see storage/sqlite) for every tenant of
// the store, or a configured set; a Client, bound to one tenant
// (Runtime.Client or NewClient), starts instances, raises events and reads
// state. Time comes from one clock (package clock), and the engine reports
// what it does to an Observer.
package herald
