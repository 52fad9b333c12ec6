package backend

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema change of a backend, read from a file named
// NNNN_description.sql.
type Migration struct {
	Version int    // NNNN, positive
	Name    string // the file's name
	SQL     string // its text, in the backend's dialect
}

// Migrations reads the migrations dir/*.sql of fsys (a backend's embedded
// files), in version order. A name without a positive NNNN_ prefix or two
// files of one version are refused.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := make(map[int]string)
	for _, n := range names {
		base := strings.TrimPrefix(n, dir+"/")
		prefix, _, ok := strings.Cut(base, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", base)
		}
		v, err := strconv.Atoi(prefix)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: bad version %q", base, prefix)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, base, v)
		}
		seen[v] = base
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}
