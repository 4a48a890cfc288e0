package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/diskcheck"
	"github.com/narad-io/storage/httpapi"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
)

// readTimeout bounds the reading of a request, its body included: a body
// trickled slower than this is cut (the produce body's meter keeps it
// when it moves the deadline: httpapi, body.go).
const readTimeout = 5 * time.Minute

// Server is one node: its partitions (a runtime.Node), its HTTP API, and,
// on etcd, its membership of a cluster and its moves.
//
// Its life is New, Start, Close (Close after Start whatever Start
// returned, or in its stead; Close again returns the first Close's
// outcome). Close may come from another goroutine while Start runs: it
// ends that Start first. Handler, Node, Ready, Gatherer, EndLongPolls and
// ReloadTLS may be called at any time after New, from any goroutine.
//
// Invariants: closed is set, under lifecycle, as Close begins, and no
// Start begins after it; a Start under way has stopStart and startDone
// set (under lifecycle), and Close cancels it and waits for startDone
// before it stops anything, so all Start sets (served, stopMover, disk.done) is
// Close's to read once startDone is closed.
type Server struct {
	cfg      Config
	logger   *zap.Logger
	node     *runtime.Node
	member   *cluster.Participant // nil: a node alone, on the embedded metastore
	peerTLS  *tls.Config          // a cluster's node: its calls to other nodes
	token    []byte
	certs    *certReloader // nil: plain HTTP
	reg      *prometheus.Registry
	disk     startupCheck // Start's disk check
	api      *httpapi.Handler
	listener net.Listener // nil: the embedding program serves Handler
	http     *http.Server // nil without listener
	addr     string       // a cluster's node: the address it registers

	closing   chan struct{} // closed by EndLongPolls
	endOnce   sync.Once
	failed    chan error    // the own server's Serve, ended other than by Close
	served    chan struct{} // closed when the own server's Serve returned; nil before Start
	stopMover func()        // a cluster's node: stops its mover (cluster.Participant.StopMover)
	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool // set as Close begins

	lifecycle sync.Mutex
	stopStart context.CancelCauseFunc // the Start under way's; nil before Start
	startDone chan struct{}           // closed when that Start returned
}

// ErrClosed is what Start returns once Close began: a Start that Close
// ended, or one called after Close.
var ErrClosed = errors.New("server: closed")

// New opens the node cfg describes: it takes the data directory's lock
// (datadir.ErrLocked if another process holds it; the directory
// of another node or cluster is datadir.ErrIdentity), opens its
// metastore (a cluster's node waits for etcd until ctx ends), and opens
// its listener. Nothing is served before Start.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, closing: make(chan struct{}), failed: make(chan error, 1), stopMover: func() {}}
	if s.logger == nil {
		s.logger = zap.NewNop()
	}
	files := vfs.OS{}
	// The data directory's lock comes before anything in it is read or
	// written; the node owns it from runtime.New on and releases it at
	// its Close.
	lock, err := datadir.Acquire(files, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	nodeOwnsLock := false
	undo = append(undo, func() {
		if !nodeOwnsLock {
			lock.Release()
		}
	})
	if s.token, err = readToken(files, cfg.AuthTokenFile); err != nil {
		return nil, err
	}
	if cfg.TLSCert != "" {
		if s.certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, err
		}
	}
	cd, err := codec.ByName(cfg.Codec)
	if err != nil {
		return nil, err
	}
	// The node's own metrics (Gatherer), and the Go runtime's and the
	// process's, which GET /metrics serves beside them but a program
	// embedding the node has already.
	s.reg = prometheus.NewRegistry()
	process := prometheus.NewRegistry()
	process.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ms, err := s.openMetastore(ctx, files)
	if err != nil {
		return nil, err
	}
	if s.member != nil {
		undo = append(undo, func() {
			stop, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownTimeout))
			defer cancel()
			if err := s.member.Close(stop); err != nil {
				s.logger.Warn("leaving the cluster", zap.Error(err))
			}
		})
	}
	cfg = cfg.withDescriptorDefaults()
	s.cfg = cfg
	s.disk = startupCheck{metrics: diskcheck.NewMetrics(s.reg, cfg.DataDir), margin: diskCheckMargin}
	nodeOwnsLock = true // New releases it if it fails, Close once it closed every log
	s.node, err = runtime.New(runtime.Config{
		DataDir:                      cfg.DataDir,
		FS:                           files,
		Codec:                        cd,
		IdleEvictAfter:               time.Duration(cfg.IdleEvictAfter),
		ReaperInterval:               time.Duration(cfg.ReaperInterval),
		ColdWalkInterval:             time.Duration(cfg.ColdWalkInterval),
		ConsumerOffsetCommitInterval: time.Duration(cfg.ConsumerOffsetCommitInterval),
		DataDirLock:                  lock,
		MinFreeBytes:                 cfg.MinFreeBytes,
		MinFreeInodes:                cfg.MinFreeInodes,
		MaxOpenLogs:                  cfg.MaxOpenLogs,
		MetricsByTopic:               cfg.MetricsByTopic,
		FrameCacheBytes:              cfg.FrameCacheBytes,
		SegmentMaxBytes:              cfg.SegmentMaxBytes,
		ScrubRate:                    cfg.ScrubRate,
		Metastore:                    ms,
		Logger:                       s.logger,
		Registerer:                   s.reg,
	})
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { s.node.Close() })
	if s.member != nil {
		s.member.Attach(s.node)
	}
	if err := s.listen(); err != nil {
		return nil, err
	}
	var owners httpapi.OwnerLocator // nil, not a nil *cluster.Participant, when alone
	if s.member != nil {
		owners = s.member
	}
	s.api = httpapi.New(s.node, ms, s.logger, s.reg, httpapi.Options{Token: s.token, MaxBody: cfg.MaxBodyBytes, MaxInflight: cfg.MaxInflightBytes,
		MaxAnswer: cfg.MaxAnswerBytes, ReadTimeout: readTimeout, Pprof: cfg.Pprof, AccessLog: cfg.AccessLog, Closing: s.closing, Owners: owners, Cluster: s.member,
		Metrics: prometheus.Gatherers{process, s.reg}})
	if s.listener != nil {
		s.http = s.newHTTPServer()
	}
	return s, nil
}

// readToken reads the bearer token file, if one is named.
func readToken(files vfs.FS, name string) ([]byte, error) {
	if name == "" {
		return nil, nil
	}
	// As ssh does with keys: a secret others can read is no secret.
	fi, err := files.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("auth token file: %w", err)
	}
	if perm := fi.Mode.Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("auth token file %s is readable by group or others (mode %#o); chmod 600 it", name, perm)
	}
	b, err := vfs.ReadFile(files, name, 4096)
	if err != nil {
		return nil, fmt.Errorf("auth token file: %w", err)
	}
	token := []byte(strings.TrimSpace(string(b)))
	if len(token) == 0 {
		return nil, errors.New("auth token file is empty")
	}
	return token, nil
}

// openMetastore opens the embedded metastore of a node alone, or joins
// the cluster's etcd (s.member), refusing a data directory of the other
// kind.
func (s *Server) openMetastore(ctx context.Context, files vfs.FS) (runtime.Metastore, error) {
	cfg := s.cfg
	endpoints, _ := etcdEndpoints(cfg.Metastore)
	if endpoints == nil {
		for _, stored := range []func(vfs.FS, string) (string, bool, error){datadir.StoredNodeID, datadir.StoredClusterID} {
			if id, ok, err := stored(files, cfg.DataDir); err != nil {
				return nil, err
			} else if ok {
				return nil, fmt.Errorf("%w: %s is a cluster's node's (%s; its topic records are in etcd); give --metastore etcd://...", datadir.ErrIdentity, cfg.DataDir, id)
			}
		}
		local, err := runtime.OpenLocalMetastore(files, cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if damage := local.Recovered(); damage != "" {
			s.logger.Error("metastore file damaged; serving its copy, which the next change rewrites both from", zap.String("damage", damage))
		}
		return local, nil
	}
	var err error
	if s.peerTLS, err = peerTLSConfig(cfg, s.certs != nil); err != nil { // before anything opens: a bad --peer-ca is a usage error
		return nil, err
	}
	transfer := httpapi.NewTransfer(s.token, s.peerTLS)
	s.member, err = cluster.OpenParticipant(ctx, cluster.ParticipantConfig{Endpoints: endpoints, DataDir: cfg.DataDir, FS: files, NodeID: cfg.NodeID,
		MemberTTL: time.Duration(cfg.MemberTTL), FenceAfter: time.Duration(cfg.FenceAfter), Transfer: transfer, Logger: s.logger})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopped while waiting for etcd
		}
		return nil, err
	}
	s.stopMover = func() {
		s.member.StopMover()
		transfer.CloseIdle()
	}
	return s.member.Metastore(), nil
}

// listen opens the own listener (none without a listen address) and
// settles the address a cluster's node registers.
func (s *Server) listen() error {
	scheme := "http"
	if s.certs != nil {
		scheme = "https"
	}
	if s.cfg.Listen != "" {
		l, err := net.Listen("tcp", s.cfg.Listen)
		if err != nil {
			return err
		}
		if s.cfg.MaxConnections > 0 {
			l = newLimitListener(l, s.cfg.MaxConnections, s.reg)
		}
		s.listener = l
	}
	if s.member == nil {
		return nil
	}
	var listening net.Addr
	if s.listener != nil {
		listening = s.listener.Addr()
	}
	addr, err := advertised(s.cfg.AdvertiseAddr, scheme, listening)
	if err != nil {
		if s.listener != nil {
			s.listener.Close()
		}
		return err
	}
	s.addr = addr
	return nil
}

// newHTTPServer is the own server of the API, with its limits.
func (s *Server) newHTTPServer() *http.Server {
	server := &http.Server{
		Handler:           s.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       readTimeout,
		WriteTimeout:      5 * time.Minute, // above the longest long poll
		IdleTimeout:       2 * time.Minute,
		ConnContext:       httpapi.ConnContext,
		// Headers come before authentication: a client without the token
		// can send them, so they are bounded well below the default 1 MiB.
		MaxHeaderBytes: 64 << 10,
		// An HTTP/2 connection's requests at once: --max-connections
		// bounds connections, this what each may run.
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 100},
		// OPTIONS * reaches the API, which answers it as every request
		// that is not a path: 400 in JSON.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     zap.NewStdLog(s.logger.Named("http")),
	}
	if len(s.token) > 0 {
		server.ConnContext = httpapi.ConnContextWithAuthDeadline
	}
	if s.certs != nil {
		server.TLSConfig = s.certs.config()
	}
	server.RegisterOnShutdown(s.EndLongPolls)
	return server
}

// Start serves the API on the own listener (answering 503 not_ready
// until ready), runs the disk check (Config.DiskCheckBudget; its
// findings are logged, none stops the start, and it is waited for at
// most its budget and a margin of 1 s: a flush that hangs is logged and
// left to end on its own), opens the partitions the design opens before
// ready, and, on etcd, registers the node and starts its mover. It
// returns nil once the node is ready; ctx's error if ctx ended first;
// ErrClosed if Close began first; else what stopped it. Close the server
// after Start, whatever it returned.
func (s *Server) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.lifecycle.Lock()
	if s.closed.Load() {
		s.lifecycle.Unlock()
		return ErrClosed
	}
	done := make(chan struct{})
	s.stopStart, s.startDone = cancel, done
	s.lifecycle.Unlock()
	defer close(done)
	err := s.start(ctx)
	if err != nil && context.Cause(ctx) == ErrClosed {
		return ErrClosed
	}
	return err
}

func (s *Server) start(ctx context.Context) error {
	if s.http != nil {
		s.served = make(chan struct{})
		go func() {
			defer close(s.served)
			var err error
			if s.certs != nil {
				err = s.http.ServeTLS(s.listener, "", "")
			} else {
				err = s.http.Serve(s.listener)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				s.failed <- err
			}
		}()
		scheme := "http"
		if s.certs != nil {
			scheme = "https"
		}
		s.logger.Info("listening", zap.String("addr", s.listener.Addr().String()), zap.String("scheme", scheme))
	}
	if s.cfg.DiskCheckBudget > 0 {
		if err := s.checkDisk(ctx); err != nil {
			return err
		}
	}
	startCtx, stopNodeStart := context.WithCancel(ctx)
	defer stopNodeStart()
	started := make(chan error, 1)
	go func() { started <- s.node.Start(startCtx) }()
	select {
	case err := <-started:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("startup: %w", err)
		}
	case err := <-s.failed:
		stopNodeStart()
		<-started // never close the node under a running start
		return err
	case <-ctx.Done():
		<-started
		return ctx.Err()
	}
	if s.member != nil {
		// Registered once started: a node marked lost sets its copies of
		// the partitions given away aside first (Join), and until it is
		// registered it answers 503 fenced. Join starts the mover.
		if err := s.member.Join(ctx, s.addr); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
	warnIfFewDescriptors(ctx, s.node, s.cfg.MaxOpenLogs, s.logger)
	s.logger.Info("ready")
	return nil
}

// Failed receives the error that ended the own listener's serving while
// the server ran (never one of Close's).
func (s *Server) Failed() <-chan error { return s.failed }

// Handler is the HTTP API (docs/http-api.md) over the node, to mount on
// any mux or serve with any http.Server. A program that serves it itself
// registers EndLongPolls with its server's RegisterOnShutdown and shuts
// its server down before Close.
func (s *Server) Handler() http.Handler { return s.api }

// Node is the node's partitions, for a program that also calls them
// directly.
func (s *Server) Node() *runtime.Node { return s.node }

// Addr is the own listener's address; nil when the embedding program
// serves Handler itself.
func (s *Server) Addr() net.Addr {
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Ready reports what GET /readyz answers 200 for: the partitions the
// design opens before ready are open and, a cluster's node, it is
// registered and not fenced. It is false from Close on.
func (s *Server) Ready() bool { return !s.closed.Load() && s.api.NotReady() == "" }

// Gatherer is the node's metrics, to gather beside the embedding
// program's own: what GET /metrics serves but the Go runtime's and the
// process's (go_*, process_*), which the program's registry has already.
func (s *Server) Gatherer() prometheus.Gatherer { return s.reg }

// EndLongPolls answers every waiting long poll at once (as its wait's
// end) and every later one without a wait: the first step of a stop.
func (s *Server) EndLongPolls() { s.endOnce.Do(func() { close(s.closing) }) }

// ReloadTLS reads the certificate and key again (a renewed certificate
// takes effect without a restart); a reload that fails keeps the one in
// use. It logs what it did.
func (s *Server) ReloadTLS() {
	if s.certs == nil {
		s.logger.Info("TLS is off, nothing to reload")
		return
	}
	s.certs.reloadAndLog(s.logger)
}

// Close stops the node gracefully within Config.ShutdownTimeout: it ends
// a Start under way (and waits for it), stops the mover, ends long polls,
// stops accepting and lets in-flight requests finish (their contexts stay
// live: a produce in flight completes its commit), closes every log (each
// hwm file written), leaves the cluster, and waits for the startup disk
// check's probe if it still runs (a hung flush's: no longer than what is
// left of the timeout). It returns the first Close's outcome to every
// call.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	s.lifecycle.Lock()
	s.closed.Store(true)
	stopStart, startDone := s.stopStart, s.startDone
	s.lifecycle.Unlock()
	if stopStart != nil {
		stopStart(ErrClosed) // a Start under way ends first
		<-startDone
	}
	stop, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.ShutdownTimeout))
	defer cancel()
	s.stopMover() // no pull runs into a closing node
	s.EndLongPolls()
	var err error
	if s.http != nil {
		drain, cancelDrain := drainDeadline(stop)
		err = s.http.Shutdown(drain)
		cancelDrain()
		if s.served == nil {
			s.listener.Close() // never served: Shutdown knows no listener
		} else {
			<-s.served // the listener is closed once Serve returned
		}
	}
	if cerr := s.node.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err == nil {
		s.logger.Info("stopped: every log closed")
	}
	if s.member != nil {
		if lerr := s.member.Close(stop); lerr != nil {
			s.logger.Warn("leaving the cluster", zap.Error(lerr))
		}
	}
	s.waitDiskCheck(stop)
	return err
}

// drainDeadline is the part of a graceful stop's deadline the HTTP
// server's drain may take: all but a quarter of what is left (at most
// 5 s), kept for what comes after the logs close (a cluster's node
// resigns and revokes its lease), so a drain held up by a long upload
// never leaves the leave no time.
func drainDeadline(deadline context.Context) (context.Context, context.CancelFunc) {
	d, ok := deadline.Deadline()
	if !ok {
		return context.WithCancel(deadline)
	}
	return context.WithDeadline(deadline, d.Add(-min(time.Until(d)/4, 5*time.Second)))
}
