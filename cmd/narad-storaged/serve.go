package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"
)

// runServe starts the node and serves it until SIGTERM or SIGINT.
func runServe(args []string, stderr io.Writer) int {
	cfg, err := parseServeFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "narad-storaged:", err)
		return 2
	}
	logger, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "narad-storaged:", err)
		return 2
	}
	defer logger.Sync()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		if errors.Is(err, runtime.ErrDataDirLocked) || errors.Is(err, runtime.ErrDataDirIdentity) {
			// Another daemon serves this data directory, or it is another
			// node's: a usage error, said plainly (exit 2), not a crash.
			logger.Error("narad-storaged refused to start", zap.Error(err))
			fmt.Fprintln(stderr, "narad-storaged:", err)
			return 2
		}
		logger.Error("narad-storaged stopped", zap.Error(err))
		return 1
	}
	return 0
}

func newLogger(cfg config, stderr io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch cfg.LogFormat {
	case "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log-format %q: want json or console", cfg.LogFormat)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.AddSync(stderr), level)), nil
}

// readTimeout bounds the reading of a request, its body included: a body
// trickled slower than this is cut (the produce body's meter keeps it
// when it moves the deadline, api_body.go).
const readTimeout = 5 * time.Minute

// serve runs the node until ctx ends, then shuts down gracefully: stop
// accepting, finish in-flight requests (long polls end early), close every
// log (each hwm file written), within the shutdown timeout.
func serve(ctx context.Context, cfg config, logger *zap.Logger) error {
	files := vfs.OS{}
	// The data directory's lock comes before anything in it is read or
	// written; the node owns it from New on and releases it at Close.
	lock, err := runtime.LockDataDir(files, cfg.DataDir)
	if err != nil {
		return err
	}
	nodeOwnsLock := false
	defer func() {
		if !nodeOwnsLock {
			lock.Release()
		}
	}()
	var token []byte
	if cfg.AuthTokenFile != "" {
		// As ssh does with keys: a secret others can read is no secret.
		fi, err := files.Stat(cfg.AuthTokenFile)
		if err != nil {
			return fmt.Errorf("auth token file: %w", err)
		}
		if perm := fi.Mode.Perm(); perm&0o077 != 0 {
			return fmt.Errorf("auth token file %s is readable by group or others (mode %#o); chmod 600 it", cfg.AuthTokenFile, perm)
		}
		b, err := vfs.ReadFile(files, cfg.AuthTokenFile, 4096)
		if err != nil {
			return fmt.Errorf("auth token file: %w", err)
		}
		token = []byte(strings.TrimSpace(string(b)))
		if len(token) == 0 {
			return errors.New("auth token file is empty")
		}
	}
	var certs *certReloader
	if cfg.TLSCert != "" {
		if certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey); err != nil {
			return err
		}
	}
	cd, err := codec.ByName(cfg.Codec)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	stopping := &stopDeadline{timeout: time.Duration(cfg.ShutdownTimeout)}
	defer stopping.release()
	var ms runtime.Metastore
	var member *clusterNode // nil: a node alone, on the embedded metastore
	var peerTLS *tls.Config // a cluster's node: its calls to other nodes
	if endpoints, _ := etcdEndpoints(cfg.Metastore); endpoints == nil {
		for _, stored := range []func(vfs.FS, string) (string, bool, error){runtime.StoredNodeID, runtime.StoredClusterID} {
			if id, ok, err := stored(files, cfg.DataDir); err != nil {
				return err
			} else if ok {
				return fmt.Errorf("%w: %s is a cluster's node's (%s; its topic records are in etcd); give --metastore etcd://...", runtime.ErrDataDirIdentity, cfg.DataDir, id)
			}
		}
		local, err := runtime.OpenLocalMetastore(files, cfg.DataDir)
		if err != nil {
			return err
		}
		if damage := local.Recovered(); damage != "" {
			logger.Error("metastore file damaged; serving its copy, which the next change rewrites both from", zap.String("damage", damage))
		}
		ms = local
	} else {
		if peerTLS, err = peerTLSConfig(cfg, certs != nil); err != nil { // before anything opens: a bad --peer-ca is a usage error
			return err
		}
		member, err = openClusterNode(ctx, files, cfg, endpoints, logger)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while waiting for etcd
			}
			return err
		}
		defer func() {
			if err := member.close(stopping.context()); err != nil {
				logger.Warn("leaving the cluster", zap.Error(err))
			}
		}()
		ms = member.ms
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = defaultMaxConnections()
	}
	if cfg.MaxOpenLogs == 0 {
		cfg.MaxOpenLogs = runtime.DefaultMaxOpenLogsBeside(max(cfg.MaxConnections, 0))
	}
	node, err := runtime.New(runtime.Config{
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
		FrameCacheBytes:              cfg.FrameCacheBytes,
		SegmentMaxBytes:              cfg.SegmentMaxBytes,
		Metastore:                    ms,
		Logger:                       logger,
		Registerer:                   reg,
	})
	nodeOwnsLock = true // New releases it if it fails, Close once it closed every log
	if err != nil {
		return err
	}

	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		node.Close()
		return err
	}
	if cfg.MaxConnections > 0 {
		listener = newLimitListener(listener, cfg.MaxConnections, reg)
	}
	scheme := "http"
	if certs != nil {
		scheme = "https"
	}
	var owners ownerLocator // nil, not a nil *clusterNode, when alone
	var addr string         // a cluster's node: the address it registers, once started
	if member != nil {
		if addr, err = advertised(cfg.AdvertiseAddr, scheme, listener.Addr()); err != nil {
			listener.Close()
			node.Close()
			return err
		}
		owners = member
	}
	stopReloads := reloadOnHangup(certs, logger)
	defer stopReloads()
	closing := make(chan struct{})
	var closeOnce sync.Once
	endLongPolls := func() { closeOnce.Do(func() { close(closing) }) }
	defer endLongPolls()
	api := newAPI(node, ms, logger, reg, apiOptions{token: token, maxBody: cfg.MaxBodyBytes, maxInflight: cfg.MaxInflightBytes, maxAnswer: cfg.MaxAnswerBytes, readTimeout: readTimeout, pprof: cfg.Pprof, access: cfg.AccessLog, closing: closing, owners: owners, cluster: member})
	server := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       readTimeout,
		WriteTimeout:      5 * time.Minute, // above the longest long poll
		IdleTimeout:       2 * time.Minute,
		ConnContext:       withConnAuth,
		// Headers come before authentication: a client without the token
		// can send them, so they are bounded well below the default 1 MiB.
		MaxHeaderBytes: 64 << 10,
		// An HTTP/2 connection's requests at once: --max-connections
		// bounds connections, this what each may run.
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 100},
		// OPTIONS * reaches the API, which answers it as every request
		// that is not a path: 400 in JSON.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     zap.NewStdLog(logger.Named("http")),
	}
	if len(token) > 0 {
		server.ConnContext = withConnAuthDeadline
	}
	served := make(chan error, 1)
	if certs != nil {
		server.TLSConfig = certs.config()
		go func() { served <- server.ServeTLS(listener, "", "") }()
	} else {
		go func() { served <- server.Serve(listener) }()
	}
	logger.Info("narad-storaged starting", zap.String("version", version), zap.String("data_dir", cfg.DataDir),
		zap.String("addr", listener.Addr().String()), zap.String("codec", cfg.Codec))
	logger.Info("listening", zap.String("addr", listener.Addr().String()), zap.String("scheme", scheme))

	stopMover := func() {} // a cluster's node: its mover's close, once it runs
	startCtx, stopStart := context.WithCancel(ctx)
	defer stopStart()
	started := make(chan error, 1)
	go func() { started <- node.Start(startCtx) }()
	select {
	case err := <-started:
		if err != nil && ctx.Err() == nil {
			shutdown(server, endLongPolls, node, stopping.context(), logger)
			return fmt.Errorf("startup: %w", err)
		}
		if err == nil && member != nil {
			// Registered once started: a node marked lost sets its copies
			// of the partitions given away aside first (join), and until it
			// is registered it answers 503 fenced.
			if err = member.join(ctx, addr, node); err != nil && ctx.Err() == nil {
				shutdown(server, endLongPolls, node, stopping.context(), logger)
				return err
			}
		}
		if err == nil {
			warnIfFewDescriptors(ctx, node, cfg.MaxOpenLogs, logger)
			if member != nil {
				m := startMover(member, node, token, peerTLS, logger)
				stopMover = m.close
			}
			logger.Info("ready")
			if err := sdNotify("READY=1"); err != nil {
				logger.Warn("systemd notification", zap.Error(err))
			}
		}
	case err := <-served:
		stopStart()
		<-started // never close the node under a running start
		node.Close()
		return err
	case <-ctx.Done():
		<-started
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		stopMover()
		node.Close()
		return err
	}
	logger.Info("shutting down")
	stop := stopping.context() // from here
	stopMover()                // no pull runs into a closing node
	return shutdown(server, endLongPolls, node, stop, logger)
}

// stopDeadline is a graceful stop's one bound, --shutdown-timeout: taken
// at the stop's first step and shared by every step after it (the
// server's drain, the logs' close, leaving the cluster), so the whole
// stop ends within it whatever etcd does. Used by serve's goroutine only.
type stopDeadline struct {
	timeout time.Duration
	ctx     context.Context // nil until the stop begins
	cancel  context.CancelFunc
}

// context is the stop's deadline, from the first call on.
func (s *stopDeadline) context() context.Context {
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithTimeout(context.Background(), s.timeout)
	}
	return s.ctx
}

func (s *stopDeadline) release() {
	if s.cancel != nil {
		s.cancel()
	}
}

// shutdown stops accepting, answers long polls at once, lets in-flight
// requests finish (their contexts stay live: a produce in flight completes
// its commit) until the stop's deadline, then closes every log.
func shutdown(server *http.Server, endLongPolls func(), node *runtime.Node, deadline context.Context, logger *zap.Logger) error {
	if err := sdNotify("STOPPING=1"); err != nil {
		logger.Warn("systemd notification", zap.Error(err))
	}
	endLongPolls()
	drain, cancel := drainDeadline(deadline)
	defer cancel()
	err := server.Shutdown(drain)
	if cerr := node.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err == nil {
		logger.Info("stopped: every log closed")
	}
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

// reloadOnHangup reloads the TLS certificate (if TLS is on) at each
// SIGHUP until the returned stop; a SIGHUP never stops the daemon.
func reloadOnHangup(certs *certReloader, logger *zap.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-hup:
				if certs == nil {
					logger.Info("SIGHUP: TLS is off, nothing to reload")
					continue
				}
				certs.reloadAndLog(logger)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}

// warnIfFewDescriptors says at start when the node's open-log budget
// cannot hold every partition on disk open at once: it still serves them
// all, but each open past the budget closes the least recently used idle
// log first, so a workload touching more partitions than the budget pays
// a close and an open per touch.
func warnIfFewDescriptors(ctx context.Context, node *runtime.Node, maxOpenLogs int, logger *zap.Logger) {
	if maxOpenLogs == 0 {
		maxOpenLogs = runtime.DefaultMaxOpenLogs()
	}
	if maxOpenLogs <= 0 {
		return
	}
	owned, err := node.Partitions(ctx)
	if err != nil {
		return
	}
	partitions := len(owned)
	if partitions > maxOpenLogs {
		var lim unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
		logger.Warn("more partitions on disk than the open-log budget: past it, each open first closes the least recently used idle log",
			zap.Int("partitions", partitions), zap.Int("max_open_logs", maxOpenLogs), zap.Uint64("open_file_limit", lim.Cur),
			zap.String("fix", fmt.Sprintf("raise the open-file limit (LimitNOFILE= in the unit, ulimit -n) to %d, or --max-open-logs",
				partitions*runtime.DescriptorsPerLog+runtime.DescriptorHeadroom)))
	}
}
