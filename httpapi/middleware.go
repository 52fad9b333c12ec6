package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"
)

// accessInfo is what the access log says of a request, filled in as the
// request is served.
type accessInfo struct {
	id     string
	keyID  string
	tenant string
}

type accessKey struct{}

func accessOf(ctx context.Context) *accessInfo {
	ai, _ := ctx.Value(accessKey{}).(*accessInfo)
	return ai
}

// requestID is the request's id ("" outside a request).
func requestID(ctx context.Context) string {
	if ai := accessOf(ctx); ai != nil {
		return ai.id
	}
	return ""
}

func setAccessKey(ctx context.Context, keyID string) {
	if ai := accessOf(ctx); ai != nil {
		ai.keyID = keyID
	}
}

func setAccessTenant(ctx context.Context, tenant string) {
	if ai := accessOf(ctx); ai != nil {
		ai.tenant = tenant
	}
}

// statusWriter records the status and size of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withAccessLog gives each request an id (answered in Herald-Request-Id)
// and logs one line per request: method, route, status, size, duration,
// key id and tenant — never a payload, a query value or a secret.
func (a *API) withAccessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var b [8]byte
		rand.Read(b[:])
		ai := &accessInfo{id: hex.EncodeToString(b[:])}
		r = r.WithContext(context.WithValue(r.Context(), accessKey{}, ai))
		w.Header().Set("Herald-Request-Id", ai.id)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "(none)"
		}
		a.logger.LogAttrs(r.Context(), accessLevel(sw.status), "http request",
			slog.String("request_id", ai.id),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes),
			slog.Duration("duration", time.Since(start)),
			slog.String("key", ai.keyID),
			slog.String("tenant", ai.tenant),
		)
	})
}

// withRecover turns a panic in a handler into a logged 500 problem.
func (a *API) withRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.logger.ErrorContext(r.Context(), "herald api: panic serving a request",
				"method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()),
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			// If the handler already wrote a header this adds nothing the
			// client can read, but the connection is still answered.
			a.writeProblem(w, r, newProblem(probInternal, "", r))
		}()
		next.ServeHTTP(w, r)
	})
}

// accessLevel logs server errors at WARN, the rest at INFO.
func accessLevel(status int) slog.Level {
	if status >= http.StatusInternalServerError {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
