package httpapi

import (
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"
)

// What one request may ask for is the API's (api.MaxFetchRecords,
// ...); a topic's partitions are bounded by what a directory name holds.
const (
	maxFetchBytes = api.MaxFetchBytes
	maxPartitions = wire.MaxPartitions
)

// Options are a Handler's bounds and its place in a cluster; the zero
// value is a node alone with no bounds but MaxBody's (which must be set).
type Options struct {
	Token   []byte // the bearer token every request but /healthz must carry; empty: no authentication
	MaxBody int64  // largest request body (--max-body-bytes)
	// MaxInflight bounds the produce bodies held at once, in bytes
	// (--max-inflight-bytes); 0: none.
	MaxInflight int64
	// MaxAnswer bounds the records answers in flight, each counted at its
	// max_bytes (--max-answer-bytes); 0: none.
	MaxAnswer int64
	// ReadTimeout is the serving http.Server's ReadTimeout: a produce body
	// is cut by it whatever its rate (the meter's deadline replaces the
	// server's); 0: none.
	ReadTimeout time.Duration
	Pprof       bool                 // serve /debug/pprof/
	AccessLog   bool                 // log every request (--access-log)
	Closing     <-chan struct{}      // closed at shutdown: long polls answer at once
	Owners      OwnerLocator         // a cluster's node: where other nodes' partitions are; nil alone
	Cluster     *cluster.Participant // a cluster's node: its moves; nil alone
	// Metrics is what GET /metrics serves; nil: the registry the Handler
	// registers its own in.
	Metrics prometheus.Gatherer

	// bodyGrace and minBodyRate: a produce body must arrive at
	// minBodyRate bytes a second after bodyGrace (body.go); zero: the
	// defaults. Tests shorten them.
	bodyGrace   time.Duration
	minBodyRate int64
}

// Handler is the HTTP API of docs/http-api.md over a runtime.Node.
type Handler struct {
	node    *runtime.Node
	ms      runtime.Metastore
	logger  *zap.Logger
	opts    Options
	mux     *http.ServeMux
	closing <-chan struct{}
	metrics httpMetrics
	// inflight holds a produce body's bytes as they are read, until its
	// records are committed; nil: no bound.
	inflight *semaphore.Weighted
	// answers holds a records answer's max_bytes while it is read and
	// written, never while a long poll waits; nil: no bound.
	answers *semaphore.Weighted
	// answerBytes is what answers holds now (narad_http_answer_bytes_in_flight).
	answerBytes atomic.Int64
}

// New is the API over node, registering its metrics in reg.
func New(node *runtime.Node, ms runtime.Metastore, logger *zap.Logger, reg *prometheus.Registry, opts Options) *Handler {
	opts.bodyGrace = cmp.Or(opts.bodyGrace, bodyGrace)
	opts.minBodyRate = cmp.Or(opts.minBodyRate, minBodyRate)
	a := &Handler{node: node, ms: ms, logger: logger, opts: opts, mux: http.NewServeMux(), closing: opts.Closing, metrics: newHTTPMetrics(reg)}
	if a.closing == nil {
		a.closing = make(chan struct{})
	}
	if opts.MaxInflight > 0 {
		a.inflight = semaphore.NewWeighted(opts.MaxInflight)
	}
	if opts.MaxAnswer > 0 {
		a.answers = semaphore.NewWeighted(opts.MaxAnswer)
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "narad_http_answer_bytes_in_flight",
		Help: "Bytes of --max-answer-bytes held by records answers being read and written (each at its max_bytes)."},
		func() float64 { return float64(a.answerBytes.Load()) }))
	a.mux.HandleFunc("PUT /v1/topics/{topic}", a.putTopic)
	a.mux.HandleFunc("GET /v1/topics", a.listTopics)
	a.mux.HandleFunc("GET /v1/topics/{topic}", a.getTopic)
	a.mux.HandleFunc("PATCH /v1/topics/{topic}", a.patchTopic)
	a.mux.HandleFunc("DELETE /v1/topics/{topic}", a.deleteTopic)
	a.mux.HandleFunc("POST /v1/topics/{topic}/dictionary", a.trainDictionary)
	a.mux.HandleFunc("GET /v1/topics/{topic}/dictionaries", a.listDictionaries)
	a.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/records", a.owned(a.produce))
	a.mux.HandleFunc("GET /v1/topics/{topic}/partitions/{p}/records", a.owned(a.fetch))
	a.mux.HandleFunc("GET /v1/topics/{topic}/partitions/{p}/offset", a.owned(a.offsetAt))
	a.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/acks", a.owned(a.ack))
	a.mux.HandleFunc("GET /v1/topics/{topic}/partitions/{p}/consumer", a.owned(a.consumer))
	a.mux.HandleFunc("POST /v1/topics/{topic}/consume", a.owned(a.consume))
	a.mux.HandleFunc("POST /v1/topics/{topic}/wait", a.owned(a.waitTopic))
	a.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/nacks", a.owned(a.nack))
	a.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/extend", a.owned(a.extend))
	a.mux.HandleFunc("PUT /v1/topics/{topic}/cursors/{name}", a.owned(a.putCursor))
	a.mux.HandleFunc("GET /v1/topics/{topic}/cursors/{name}", a.owned(a.getCursor))
	a.mux.HandleFunc("DELETE /v1/topics/{topic}/cursors/{name}", a.owned(a.deleteCursor))
	a.mux.HandleFunc("GET /v1/topics/{topic}/cursors/{name}/partitions/{p}/records", a.owned(a.readCursor))
	a.mux.HandleFunc("PUT /v1/topics/{topic}/cursors/{name}/partitions/{p}", a.owned(a.commitCursor))
	a.registerMoves()
	served := opts.Metrics
	if served == nil {
		served = reg
	}
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(served, promhttp.HandlerOpts{}))
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.mux.HandleFunc("GET /readyz", a.readyz)
	if opts.Pprof {
		a.mux.HandleFunc("/debug/pprof/", pprof.Index)
		a.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		a.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		a.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		a.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	a.mux.HandleFunc("/", a.noRoute)
	return a
}

// noRoute answers a request no route takes: 405 with Allow when the path
// is an endpoint's and the method is not, else 404.
func (a *Handler) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such endpoint: "+r.URL.Path)
		return
	}
	if slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, fmt.Sprintf("%s does not take %s; it takes %s", r.URL.Path, r.Method, strings.Join(allow, ", ")))
}

// ServeHTTP checks the bearer token (in constant time; /healthz is open),
// caps the body, and routes; every request is counted and timed by its
// route. A panic in a handler answers 500, never takes the daemon down.
func (a *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// The cap reports a body over it to the server's own writer (so the
	// connection closes at once), never to the wrapper below.
	r.Body = http.MaxBytesReader(w, r.Body, a.opts.MaxBody)
	rec := &statusRecorder{ResponseWriter: w}
	w = rec
	route := "unmatched"
	defer func() {
		if r.Pattern != "" && r.Pattern != "/" {
			route = r.Pattern
		}
		took := time.Since(start)
		a.metrics.observe(route, rec.code(), took)
		if a.opts.AccessLog {
			a.logger.Info("request", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.String("route", route), zap.Int("status", rec.code()), zap.Duration("took", took),
				zap.Int64("body_bytes", r.ContentLength), zap.String("remote", r.RemoteAddr))
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			a.logger.Error("handler panic", zap.Any("panic", p), zap.Stack("stack"), zap.String("path", r.URL.Path))
			writeError(w, http.StatusInternalServerError, api.CodeInternal, "internal error")
		}
	}()
	// The token is looked at first: a connection that has not
	// authenticated closes after this answer, whatever it is.
	authorized := a.authenticate(w, r)
	if !strings.HasPrefix(r.URL.Path, "/") {
		// "*" or a CONNECT's host:port: no endpoint's; answered here, in
		// JSON, not by the router's plain text.
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "the request target must be a path")
		return
	}
	if p := r.URL.EscapedPath(); !cleanPath(p) {
		// The router would answer a redirect to the cleaned path, which a
		// client following it takes for another resource. (An escaped
		// segment, %2E%2E or a%2Fb, is a name, for its handler to judge.)
		writeError(w, http.StatusBadRequest, api.CodeInvalidPath, fmt.Sprintf("the path %q has an empty, \".\" or \"..\" segment", p))
		return
	}
	if !authorized && r.URL.Path != "/healthz" {
		route = "unauthorized"
		w.Header().Set("Connection", "close")
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "a valid bearer token is required")
		return
	}
	a.mux.ServeHTTP(w, r)
}

// authenticate reports whether r carries the token (true when the daemon
// has none). A connection is kept alive only once it has authenticated
// (conns.go): any answer on one that never has (a 400 for an odd
// request included) closes it, as a 401 does on any connection, so a
// client that fails, or never tries, holds no descriptor past its
// answer.
func (a *Handler) authenticate(w http.ResponseWriter, r *http.Request) bool {
	if len(a.opts.Token) == 0 {
		return true
	}
	conn := connAuthOf(r.Context())
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	valid := strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimLeft(got, " ")), a.opts.Token) == 1
	if valid && conn != nil {
		conn.authenticated.Store(true)
	}
	if conn != nil && !conn.authenticated.Load() {
		w.Header().Set("Connection", "close")
	}
	return valid
}

func (a *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	if reason := a.NotReady(); reason != "" {
		writeError(w, http.StatusServiceUnavailable, api.CodeNotReady, reason)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// NotReady says why the node is not ready ("" when it is).
func (a *Handler) NotReady() string {
	if !a.node.Ready() {
		return "opening partitions"
	}
	if a.opts.Owners != nil && !a.opts.Owners.Serving() {
		return "fenced: not registered in the cluster, or its lease not renewed within its fence horizon"
	}
	return ""
}

// errorBody is what an error answer carries besides its code and message
// (api.ErrorBody, the one shape every error answers with).
type errorBody struct {
	StartOffset, NextOffset *int64
	Owner                   *ownerBody
}

// writeError answers an error of code (an api.Code...) with message.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeErrorBody(w, status, code, message, nil)
}

// writeErrorBody answers an error whose body fill completes.
func writeErrorBody(w http.ResponseWriter, status int, code, message string, fill func(*errorBody)) {
	var extra errorBody
	if fill != nil {
		fill(&extra)
	}
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: message},
		StartOffset: extra.StartOffset, NextOffset: extra.NextOffset, Owner: (*api.Owner)(extra.Owner)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// partitionParam reads {p}: a decimal partition number.
func partitionParam(r *http.Request) (int, bool) {
	s := r.PathValue("p")
	p, ok := decimal(s)
	if !ok || p >= maxPartitions {
		return 0, false
	}
	return int(p), true
}

// cleanPath reports a path with no empty, "." or ".." segment (a
// trailing slash aside).
func cleanPath(p string) bool {
	segments := strings.Split(strings.TrimSuffix(p[1:], "/"), "/")
	for i, s := range segments {
		if s == "." || s == ".." || s == "" && !(i == 0 && len(segments) == 1) {
			return false
		}
	}
	return true
}

// isTooLarge reports a body over the cap.
func isTooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}
