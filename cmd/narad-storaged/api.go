package main

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Limits on what one request may ask for, so no request can make the
// daemon allocate without bound.
const (
	maxFetchRecords = 10000
	maxFetchBytes   = 64 << 20
	maxWait         = 60_000 // ms
	maxAcks         = 100000
	maxPartitions   = 100000
)

type apiOptions struct {
	token   []byte // empty: no authentication
	maxBody int64
	pprof   bool
	closing <-chan struct{} // closed at shutdown: long polls answer at once
}

// api is the HTTP API of http-api.md over a runtime.Node.
type api struct {
	node    *runtime.Node
	ms      runtime.Metastore
	logger  *zap.Logger
	opts    apiOptions
	mux     *http.ServeMux
	closing <-chan struct{}
}

func newAPI(node *runtime.Node, ms runtime.Metastore, logger *zap.Logger, reg *prometheus.Registry, opts apiOptions) *api {
	a := &api{node: node, ms: ms, logger: logger, opts: opts, mux: http.NewServeMux(), closing: opts.closing}
	if a.closing == nil {
		a.closing = make(chan struct{})
	}
	a.mux.HandleFunc("PUT /v1/topics/{topic}", a.putTopic)
	a.mux.HandleFunc("GET /v1/topics", a.listTopics)
	a.mux.HandleFunc("GET /v1/topics/{topic}", a.getTopic)
	a.mux.HandleFunc("PATCH /v1/topics/{topic}", a.patchTopic)
	a.mux.HandleFunc("DELETE /v1/topics/{topic}", a.deleteTopic)
	a.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/records", a.produce)
	a.mux.HandleFunc("GET /v1/topics/{topic}/partitions/{p}/records", a.fetch)
	a.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/acks", a.ack)
	a.mux.HandleFunc("GET /v1/topics/{topic}/partitions/{p}/consumer", a.consumer)
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.mux.HandleFunc("GET /readyz", a.readyz)
	if opts.pprof {
		a.mux.HandleFunc("/debug/pprof/", pprof.Index)
		a.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		a.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		a.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		a.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return a
}

// ServeHTTP checks the bearer token (in constant time; /healthz is open),
// caps the body, and routes. A panic in a handler answers 500, never
// takes the daemon down.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			a.logger.Error("handler panic", zap.Any("panic", p), zap.Stack("stack"), zap.String("path", r.URL.Path))
			writeError(w, http.StatusInternalServerError, "internal", "internal error")
		}
	}()
	if len(a.opts.token) > 0 && r.URL.Path != "/healthz" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), a.opts.token) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, a.opts.maxBody)
	a.mux.ServeHTTP(w, r)
}

func (a *api) readyz(w http.ResponseWriter, _ *http.Request) {
	if !a.node.Ready() {
		writeError(w, http.StatusServiceUnavailable, "not_ready", "opening partitions")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// errorBody is the one shape every error answers with.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	StartOffset *int64 `json:"start_offset,omitempty"`
	NextOffset  *int64 `json:"next_offset,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeErrorBody(w, status, code, message, nil)
}

func writeErrorBody(w http.ResponseWriter, status int, code, message string, fill func(*errorBody)) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, message
	if fill != nil {
		fill(&b)
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// partitionParam reads {p}: a decimal partition number.
func partitionParam(r *http.Request) (int, bool) {
	s := r.PathValue("p")
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p >= maxPartitions || strconv.Itoa(p) != s {
		return 0, false
	}
	return p, true
}

// decodeJSON reads a JSON body into v: one value, no trailing data.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// isTooLarge reports a body over the cap.
func isTooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}
