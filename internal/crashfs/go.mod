module github.com/heraldwf/herald/internal/crashfs

go 1.26.0

require github.com/hanwen/go-fuse/v2 v2.12.1

require golang.org/x/sys v0.49.0 // indirect

// Local modules: the go.work at the root ties them for development; these
// replaces let this module build on its own (GOWORK=off) too.
replace (
	github.com/heraldwf/herald => ../..
	github.com/heraldwf/herald/cmd/herald => ../../cmd/herald
	github.com/heraldwf/herald/internal/apitest => ../../internal/apitest
	github.com/heraldwf/herald/internal/storeurl => ../../internal/storeurl
	github.com/heraldwf/herald/internal/testdb => ../../internal/testdb
	github.com/heraldwf/herald/storage/postgres => ../../storage/postgres
	github.com/heraldwf/herald/webui => ../../webui
)
