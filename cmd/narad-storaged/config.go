package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/narad-io/storage/server"
	"github.com/narad-io/storage/vfs"
)

// config is serve's configuration: the node's (server.Config) and the
// log's. A JSON file given with --config holds the same keys (snake_case,
// durations as Go duration strings such as "1m"); flags given on the
// command line win over it.
type config struct {
	server.Config
	LogLevel  string `json:"log_level"`
	LogFormat string `json:"log_format"`
}

func defaultConfig() config {
	return config{Config: server.DefaultConfig(), LogLevel: "info", LogFormat: "json"}
}

// parseServeFlags reads the config file (if --config names one) and then
// the flags, so flags win.
func parseServeFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "JSON config file with the same keys as the flags (flags win)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (created 0700)")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address; a non-loopback address needs --auth-token-file or --insecure")
	fs.StringVar(&cfg.AuthTokenFile, "auth-token-file", cfg.AuthTokenFile, "file holding a bearer token every request but /healthz must carry")
	fs.BoolVar(&cfg.Insecure, "insecure", cfg.Insecure, "allow a non-loopback --listen without a token")
	fs.StringVar(&cfg.TLSCert, "tls-cert", cfg.TLSCert, "PEM certificate (chain) to serve HTTPS with; read again on SIGHUP")
	fs.StringVar(&cfg.TLSKey, "tls-key", cfg.TLSKey, "PEM private key of --tls-cert")
	fs.StringVar(&cfg.Codec, "codec", cfg.Codec, "codec of new frames: none or zstd")
	fs.Var(&cfg.ReaperInterval, "reaper-interval", "retention sweep of open logs")
	fs.Var(&cfg.ColdWalkInterval, "cold-walk-interval", "cold retention walk of closed logs; 0 turns it off")
	fs.Var(&cfg.IdleEvictAfter, "idle-evict-after", "close a log idle this long")
	fs.Var(&cfg.ConsumerOffsetCommitInterval, "consumer-offset-commit-interval", "consumer progress write-out interval")
	fs.Var(&cfg.ShutdownTimeout, "shutdown-timeout", "bound on a graceful shutdown")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "json or console")
	fs.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve /debug/pprof/")
	fs.BoolVar(&cfg.AccessLog, "access-log", cfg.AccessLog, "log every request at info (method, path, route, status, time)")
	fs.BoolVar(&cfg.MetricsByTopic, "metrics-by-topic", cfg.MetricsByTopic, "sum the per-partition gauges (high watermark, consumer and cursor lag) per topic: a scrape that grows with topics, not partitions")
	fs.Uint64Var(&cfg.MinFreeBytes, "min-free-bytes", cfg.MinFreeBytes, "refuse a produce (507 no_space) whose commit would leave the data directory's file system fewer free bytes; 0 turns the floor off")
	fs.Uint64Var(&cfg.MinFreeInodes, "min-free-inodes", cfg.MinFreeInodes, "refuse a produce whose commit would leave it fewer free inodes; 0 turns the floor off")
	fs.Int64Var(&cfg.SegmentMaxBytes, "segment-max-bytes", cfg.SegmentMaxBytes, "size at which a partition's active segment is sealed and a new one begun; retention deletes whole sealed segments")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "largest request body accepted")
	fs.Int64Var(&cfg.FrameCacheBytes, "frame-cache-bytes", cfg.FrameCacheBytes, "decoded frames the open logs keep cached for tail readers, together; -1: no bound of the node's own, the engine's process-wide 256 MiB")
	fs.Int64Var(&cfg.MaxInflightBytes, "max-inflight-bytes", cfg.MaxInflightBytes, "produce body bytes held at once, counted as they arrive (a body slower than 64 KiB/s after its first 10 s, or not whole within 5 minutes, is cut); past it produce is answered 503 busy; 0: no bound")
	fs.Int64Var(&cfg.MaxAnswerBytes, "max-answer-bytes", cfg.MaxAnswerBytes, "records answers in flight (fetches, cursor reads, queue consumes; each counted at its max_bytes while it reads and writes, never while a long poll waits); past it they are answered 503 busy; 0: no bound")
	fs.Int64Var(&cfg.ScrubRate, "scrub-rate", cfg.ScrubRate, "bytes a second the scrubber reads at while it checks every frame of every sealed segment the node owns: a pass at start (resuming where the last stopped; a partition whose last whole pass ended within the hour is left), then an hour after each pass (4096 or more); 0 turns it off")
	fs.IntVar(&cfg.MaxOpenLogs, "max-open-logs", cfg.MaxOpenLogs, "partition logs open at once; past it the least recently used idle one is closed first (0: from the open-file limit, 4 descriptors a log after 256 and --max-connections; -1: no bound)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "client connections open at once; past it a new one waits in the listen backlog until one closes (0: an eighth of the open-file limit, at least 128; -1: no bound)")
	fs.StringVar(&cfg.Metastore, "metastore", cfg.Metastore, "where topic records and assignments live: local (this node alone), or a cluster's etcd: etcd://host:port[,host:port...] or etcd+unix:///path")
	fs.StringVar(&cfg.NodeID, "node-id", cfg.NodeID, "this node's id in the cluster, 1 to 64 of [A-Za-z0-9._-]; stored in the data directory at the first start and checked after (default: the stored one, or a random one)")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", cfg.AdvertiseAddr, "the address other nodes and clients reach this node at (default: the --listen address, unless it is a wildcard)")
	fs.StringVar(&cfg.PeerCA, "peer-ca", cfg.PeerCA, "a cluster's node serving TLS: PEM file of the CA that signed the nodes' certificates, trusted in the calls nodes make to each other (default: the system's roots)")
	fs.Var(&cfg.MemberTTL, "member-ttl", "how long after this node stops (or loses etcd) the cluster stops counting it live; whole seconds")
	fs.Var(&cfg.DiskCheckBudget, "disk-check-budget", "time after which the disk check at start begins no new round (flushes, file system, floors, descriptors; see narad-storaged diskcheck); the start waits for it at most this and 1s more; 0 turns it off")
	fs.Var(&cfg.FenceAfter, "fence-after", "how long this node serves on while its lease cannot be renewed (etcd unreachable); also how long after it left the cluster waits before it gives its partitions away if an operator marks it lost; raised to the member-ttl if under it")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *configFile != "" {
		fromFile, err := readConfigFile(*configFile)
		if err != nil {
			return cfg, err
		}
		// Flags set on the command line win; the rest come from the file.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		merge := func(flagName string, apply func()) {
			if !set[flagName] {
				apply()
			}
		}
		merge("data-dir", func() { cfg.DataDir = fromFile.DataDir })
		merge("listen", func() { cfg.Listen = fromFile.Listen })
		merge("auth-token-file", func() { cfg.AuthTokenFile = fromFile.AuthTokenFile })
		merge("insecure", func() { cfg.Insecure = fromFile.Insecure })
		merge("tls-cert", func() { cfg.TLSCert = fromFile.TLSCert })
		merge("tls-key", func() { cfg.TLSKey = fromFile.TLSKey })
		merge("codec", func() { cfg.Codec = fromFile.Codec })
		merge("reaper-interval", func() { cfg.ReaperInterval = fromFile.ReaperInterval })
		merge("cold-walk-interval", func() { cfg.ColdWalkInterval = fromFile.ColdWalkInterval })
		merge("idle-evict-after", func() { cfg.IdleEvictAfter = fromFile.IdleEvictAfter })
		merge("consumer-offset-commit-interval", func() { cfg.ConsumerOffsetCommitInterval = fromFile.ConsumerOffsetCommitInterval })
		merge("shutdown-timeout", func() { cfg.ShutdownTimeout = fromFile.ShutdownTimeout })
		merge("log-level", func() { cfg.LogLevel = fromFile.LogLevel })
		merge("log-format", func() { cfg.LogFormat = fromFile.LogFormat })
		merge("pprof", func() { cfg.Pprof = fromFile.Pprof })
		merge("access-log", func() { cfg.AccessLog = fromFile.AccessLog })
		merge("metrics-by-topic", func() { cfg.MetricsByTopic = fromFile.MetricsByTopic })
		merge("min-free-bytes", func() { cfg.MinFreeBytes = fromFile.MinFreeBytes })
		merge("min-free-inodes", func() { cfg.MinFreeInodes = fromFile.MinFreeInodes })
		merge("max-body-bytes", func() { cfg.MaxBodyBytes = fromFile.MaxBodyBytes })
		merge("max-open-logs", func() { cfg.MaxOpenLogs = fromFile.MaxOpenLogs })
		merge("max-connections", func() { cfg.MaxConnections = fromFile.MaxConnections })
		merge("frame-cache-bytes", func() { cfg.FrameCacheBytes = fromFile.FrameCacheBytes })
		merge("max-inflight-bytes", func() { cfg.MaxInflightBytes = fromFile.MaxInflightBytes })
		merge("max-answer-bytes", func() { cfg.MaxAnswerBytes = fromFile.MaxAnswerBytes })
		merge("metastore", func() { cfg.Metastore = fromFile.Metastore })
		merge("node-id", func() { cfg.NodeID = fromFile.NodeID })
		merge("advertise-addr", func() { cfg.AdvertiseAddr = fromFile.AdvertiseAddr })
		merge("member-ttl", func() { cfg.MemberTTL = fromFile.MemberTTL })
		merge("fence-after", func() { cfg.FenceAfter = fromFile.FenceAfter })
		merge("peer-ca", func() { cfg.PeerCA = fromFile.PeerCA })
		merge("segment-max-bytes", func() { cfg.SegmentMaxBytes = fromFile.SegmentMaxBytes })
		merge("scrub-rate", func() { cfg.ScrubRate = fromFile.ScrubRate })
		merge("disk-check-budget", func() { cfg.DiskCheckBudget = fromFile.DiskCheckBudget })
	}
	if cfg.Listen == "" {
		// server.Config's "" is a program that serves the API on its own
		// server; the daemon serves it itself, so "" is an address without
		// a port, as it always was here.
		_, _, err := net.SplitHostPort(cfg.Listen)
		return cfg, fmt.Errorf("listen %q: %w", cfg.Listen, err)
	}
	return cfg, cfg.Validate()
}

// readConfigFile reads a --config file: the keys it names over the
// defaults; an unknown key is an error.
func readConfigFile(name string) (config, error) {
	cfg := defaultConfig()
	b, err := vfs.ReadFile(vfs.OS{}, name, 1<<20)
	if err != nil {
		return cfg, fmt.Errorf("config file: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("config file %s: %w", name, err)
	}
	return cfg, nil
}
