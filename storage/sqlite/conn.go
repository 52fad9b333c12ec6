package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"

	"modernc.org/sqlite"
)

// wconn is the writer's connection, used through the database/sql/driver
// interfaces directly rather than through database/sql. The writer is one
// goroutine on one connection, so database/sql's pool, its per-call
// locking, its Tx-bound statement copies and its argument conversion buy
// nothing there and cost about as much CPU as SQLite itself, on the one
// goroutine every write waits for. Every
// statement is prepared once and kept for the life of the connection.
//
// A wconn is used by one goroutine at a time.
type wconn struct {
	conn  driver.Conn
	stmts map[string]driver.Stmt
	nv    []driver.NamedValue // the arguments of the statement running (the driver keeps no reference)
	row   []driver.Value      // query's scratch row

	begin, commit, rollback, savepoint, release, rollbackTo driver.Stmt
}

// openConn opens a connection with the DSN's pragmas.
func openConn(dsn string) (*wconn, error) {
	dc, err := (&sqlite.Driver{}).Open(dsn)
	if err != nil {
		return nil, err
	}
	return &wconn{conn: dc, stmts: make(map[string]driver.Stmt)}, nil
}

// openWriterConn opens the writer connection with the DSN's pragmas and its
// transaction-control statements.
func openWriterConn(dsn string) (*wconn, error) {
	c, err := openConn(dsn)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		st *driver.Stmt
		q  string
	}{
		{&c.begin, "BEGIN IMMEDIATE"}, {&c.commit, "COMMIT"}, {&c.rollback, "ROLLBACK"},
		{&c.savepoint, "SAVEPOINT herald_req"}, {&c.release, "RELEASE herald_req"},
		{&c.rollbackTo, "ROLLBACK TO herald_req"},
	} {
		st, err := c.prepare(p.q)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("prepare %q: %w", p.q, err)
		}
		*p.st = st
	}
	return c, nil
}

// prepare returns q's statement, preparing it the first time. The queries
// the writer runs are constants, so the cache stays small.
//
// A prepared statement stays compiled only if no bound value is part of its
// plan. SQLite (3.50 on) plans a LIMIT whose operand is a bare parameter
// with the bound number as a constant, and then recompiles the statement
// every time a value is bound to it: the turn claim spent half its time
// re-parsing itself. The store's queries therefore write LIMIT +?N; the
// unary plus keeps the operand an expression, planned as an unknown limit
// as before 3.50. TestNoBareLimitParameter keeps it that way.
func (c *wconn) prepare(q string) (driver.Stmt, error) {
	if st, ok := c.stmts[q]; ok {
		return st, nil
	}
	st, err := c.conn.(driver.ConnPrepareContext).PrepareContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	c.stmts[q] = st
	return st, nil
}

func (c *wconn) close() error {
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
	return c.conn.Close()
}

// run executes one of the connection's transaction-control statements.
func (c *wconn) run(st driver.Stmt) error {
	_, err := st.(driver.StmtExecContext).ExecContext(context.Background(), nil)
	return err
}

// exec runs a statement that returns no rows.
func (c *wconn) exec(q string, args []any) (driver.Result, error) {
	st, err := c.prepare(q)
	if err != nil {
		return nil, err
	}
	nv, err := c.namedValues(args)
	if err != nil {
		return nil, err
	}
	return st.(driver.StmtExecContext).ExecContext(context.Background(), nv)
}

// query runs a statement and reads all its rows before returning, so that
// the cached statement is free again at once (a caller may run other
// statements, even the same one, while it goes through the rows).
func (c *wconn) query(q string, args []any) (*wrows, error) {
	st, err := c.prepare(q)
	if err != nil {
		return nil, err
	}
	nv, err := c.namedValues(args)
	if err != nil {
		return nil, err
	}
	rs, err := st.(driver.StmtQueryContext).QueryContext(context.Background(), nv)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	r := &wrows{cur: -1}
	ncol := len(rs.Columns())
	if cap(c.row) < ncol {
		c.row = make([]driver.Value, ncol)
	}
	row := c.row[:ncol]
	var vals []driver.Value // the rows' values, ncol at a time, in few allocations
	for {
		if err := rs.Next(row); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			clear(row)
			return nil, err
		}
		vals = append(vals, row...)
	}
	clear(row)
	if n := len(vals) / max(ncol, 1); n > 0 {
		r.rows = make([][]driver.Value, n)
		for i := range n {
			r.rows[i] = vals[i*ncol : (i+1)*ncol : (i+1)*ncol]
		}
	}
	return r, nil
}

// namedValues converts a call's arguments the way database/sql would, into
// the connection's scratch slice (valid until its next statement).
func (c *wconn) namedValues(args []any) ([]driver.NamedValue, error) {
	if len(args) == 0 {
		return nil, nil
	}
	nv := c.nv[:0]
	for i, a := range args {
		v, err := driverValue(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	c.nv = nv
	return nv, nil
}

func driverValue(a any) (driver.Value, error) {
	switch v := a.(type) {
	case nil, int64, string, []byte, bool, float64:
		return v, nil
	case int:
		return int64(v), nil
	}
	return driver.DefaultParameterConverter.ConvertValue(a)
}

// wrows is a query's result, read in full. It has the methods of
// *sql.Rows that the store's code uses.
type wrows struct {
	rows [][]driver.Value
	cur  int
}

func (r *wrows) Next() bool {
	if r.cur+1 >= len(r.rows) {
		r.cur = len(r.rows)
		return false
	}
	r.cur++
	return true
}

func (r *wrows) Scan(dest ...any) error {
	if r.cur < 0 || r.cur >= len(r.rows) {
		return errors.New("sqlite: Scan called without a row")
	}
	return scanValues(r.rows[r.cur], dest)
}

func (r *wrows) Err() error   { return nil }
func (r *wrows) Close() error { return nil }

// wrow is the first row of a query (or its error), like *sql.Row.
type wrow struct {
	rows *wrows
	err  error
}

func (r wrow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(r.rows.rows) == 0 {
		return sql.ErrNoRows
	}
	return scanValues(r.rows.rows[0], dest)
}

func scanValues(row []driver.Value, dest []any) error {
	if len(dest) != len(row) {
		return fmt.Errorf("sqlite: Scan: %d destinations for %d columns", len(dest), len(row))
	}
	for i, d := range dest {
		if err := assign(d, row[i]); err != nil {
			return fmt.Errorf("sqlite: Scan column %d: %w", i, err)
		}
	}
	return nil
}

// assign stores a column value (int64, float64, string, []byte, bool, nil
// or time.Time, as the driver returns them) in dest, with the conversions
// database/sql makes for the destination types the store uses.
func assign(dest, src any) error {
	switch d := dest.(type) {
	case *string:
		switch s := src.(type) {
		case string:
			*d = s
			return nil
		case []byte:
			*d = string(s)
			return nil
		case int64:
			*d = strconv.FormatInt(s, 10)
			return nil
		}
	case *int64:
		switch s := src.(type) {
		case int64:
			*d = s
			return nil
		case bool:
			*d = 0
			if s {
				*d = 1
			}
			return nil
		}
	case *int:
		if s, ok := src.(int64); ok {
			*d = int(s)
			return nil
		}
	case *bool:
		switch s := src.(type) {
		case int64:
			*d = s != 0
			return nil
		case bool:
			*d = s
			return nil
		}
	case *[]byte:
		switch s := src.(type) {
		case nil:
			*d = nil
			return nil
		case []byte:
			*d = append([]byte(nil), s...)
			return nil
		case string:
			*d = []byte(s)
			return nil
		}
	case *any:
		if b, ok := src.([]byte); ok {
			src = append([]byte(nil), b...)
		}
		*d = src
		return nil
	case sql.Scanner:
		if b, ok := src.([]byte); ok {
			src = append([]byte(nil), b...)
		}
		return d.Scan(src)
	}
	// Named types (type Status string, ...): convert by kind.
	dv := reflect.ValueOf(dest)
	if dv.Kind() == reflect.Pointer && !dv.IsNil() {
		e := dv.Elem()
		switch s := src.(type) {
		case string:
			if e.Kind() == reflect.String {
				e.SetString(s)
				return nil
			}
		case []byte:
			if e.Kind() == reflect.String {
				e.SetString(string(s))
				return nil
			}
		case int64:
			switch e.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				e.SetInt(s)
				return nil
			}
		}
	}
	return fmt.Errorf("cannot store %T in %T", src, dest)
}
