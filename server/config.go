package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/narad-io/storage/api"
	"net"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/diskcheck"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/scrub"
	"go.uber.org/zap"
)

// Config is a node's configuration: what narad-storaged's serve flags
// build, with the same names in snake_case as JSON keys (its --config
// file), durations as Go duration strings ("1m"). Start from
// DefaultConfig; New validates it (Validate).
type Config struct {
	// DataDir is the data directory, created 0700; required.
	DataDir string `json:"data_dir"`
	// Listen is the address the server's own http.Server listens on; ""
	// when the embedding program serves Handler itself (a cluster's node
	// then needs AdvertiseAddr). A non-loopback address needs
	// AuthTokenFile or Insecure. With "", where the program listens and
	// whether it serves TLS are its own: no loopback check applies, and
	// TLSCert only says that this node and its peers serve HTTPS (the
	// scheme advertised and the one the mover calls peers with).
	Listen        string `json:"listen"`
	AuthTokenFile string `json:"auth_token_file"` // a bearer token every request but /healthz must carry; mode 0600
	Insecure      bool   `json:"insecure"`        // allow a non-loopback Listen without a token
	TLSCert       string `json:"tls_cert"`        // PEM certificate (chain) served over HTTPS; ReloadTLS reads it again
	TLSKey        string `json:"tls_key"`         // PEM private key of TLSCert
	Codec         string `json:"codec"`           // codec of new frames: none or zstd

	ReaperInterval               Duration `json:"reaper_interval"`                 // retention sweep of open logs
	ColdWalkInterval             Duration `json:"cold_walk_interval"`              // cold retention walk of closed logs; 0: off
	IdleEvictAfter               Duration `json:"idle_evict_after"`                // close a log idle this long
	ConsumerOffsetCommitInterval Duration `json:"consumer_offset_commit_interval"` // consumer progress write-out interval
	ShutdownTimeout              Duration `json:"shutdown_timeout"`                // bound on Close

	Pprof          bool `json:"pprof"`            // serve /debug/pprof/
	AccessLog      bool `json:"access_log"`       // log every request at info
	MetricsByTopic bool `json:"metrics_by_topic"` // sum the per-partition gauges per topic (runtime.Config.MetricsByTopic)

	MinFreeBytes     uint64 `json:"min_free_bytes"`     // the disk floor in bytes (507 no_space under it); 0: off
	MinFreeInodes    uint64 `json:"min_free_inodes"`    // the disk floor in inodes; 0: off
	SegmentMaxBytes  int64  `json:"segment_max_bytes"`  // size at which an active segment is sealed
	MaxBodyBytes     int64  `json:"max_body_bytes"`     // largest request body accepted
	MaxOpenLogs      int    `json:"max_open_logs"`      // the open-log budget (0: from the open-file limit; -1: none)
	FrameCacheBytes  int64  `json:"frame_cache_bytes"`  // decoded frames cached by the open logs together
	MaxInflightBytes int64  `json:"max_inflight_bytes"` // produce body bytes held at once; 0: no bound
	MaxAnswerBytes   int64  `json:"max_answer_bytes"`   // records answers in flight, at their max_bytes; 0: no bound
	ScrubRate        int64  `json:"scrub_rate"`         // bytes a second the scrubber reads sealed segments at; 0: off
	// MaxConnections is what the own listener holds at once (0: an eighth
	// of the open-file limit; -1: no bound). Without Listen it caps
	// nothing, and is what MaxOpenLogs's default leaves to the program's
	// own connections.
	MaxConnections int `json:"max_connections"`
	// DiskCheckBudget bounds the rounds of the disk check Start runs
	// before it opens the partitions (package diskcheck: the data
	// directory's flushes, file system, floors and descriptors, each
	// finding logged and in the narad_disk_check_* gauges); Start waits
	// for it at most this and a margin of 1 s, so a hung flush is logged
	// and never holds the start. 0 turns it off.
	DiskCheckBudget Duration `json:"disk_check_budget"`

	// Metastore is where topic records and assignments live: "local" (a
	// node alone) or a cluster's etcd: etcd://host:port[,host:port...] or
	// etcd+unix:///path. The fields below it are a cluster's node's.
	Metastore     string   `json:"metastore"`
	NodeID        string   `json:"node_id"`        // stored at the first start and checked after; "": the stored one, or a random one
	AdvertiseAddr string   `json:"advertise_addr"` // where other nodes and clients reach this one; "": the Listen address
	MemberTTL     Duration `json:"member_ttl"`     // how long after this node stops the cluster stops counting it live
	FenceAfter    Duration `json:"fence_after"`    // how long it serves on while its lease cannot be renewed
	PeerCA        string   `json:"peer_ca"`        // PEM CA trusted in calls to other nodes (TLS on); "": the system's roots

	// Logger receives the node's log; nil: none.
	Logger *zap.Logger `json:"-"`
}

// DefaultConfig is the configuration narad-storaged serves with when no
// flag is given.
func DefaultConfig() Config {
	return Config{
		DataDir:                      "./narad-data",
		Listen:                       "127.0.0.1:7480",
		Codec:                        "none",
		ReaperInterval:               Duration(time.Minute),
		ColdWalkInterval:             Duration(5 * time.Minute),
		IdleEvictAfter:               Duration(30 * time.Minute),
		ConsumerOffsetCommitInterval: Duration(time.Second),
		MaxBodyBytes:                 64 << 20,
		MinFreeBytes:                 256 << 20,
		MinFreeInodes:                1000,
		FrameCacheBytes:              runtime.DefaultFrameCacheBytes,
		SegmentMaxBytes:              partition.DefaultSegmentMaxBytes,
		ScrubRate:                    scrub.DefaultRate,
		MaxInflightBytes:             1 << 30,
		MaxAnswerBytes:               1 << 30,
		DiskCheckBudget:              Duration(diskcheck.DefaultBudget),
		ShutdownTimeout:              Duration(30 * time.Second),
		Metastore:                    "local",
		MemberTTL:                    Duration(10 * time.Second),
		FenceAfter:                   Duration(cluster.DefaultFenceAfter),
	}
}

// Duration is a time.Duration that reads and writes as "1m30s" in JSON
// and in a flag (it is a flag.Value).
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"1m\": %w", err)
	}
	return d.Set(s)
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) String() string {
	if d == nil {
		return ""
	}
	return time.Duration(*d).String()
}

func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// withDescriptorDefaults fills in MaxConnections and MaxOpenLogs as a
// node serves with them: from the open-file limit when 0.
func (c Config) withDescriptorDefaults() Config {
	if c.MaxConnections == 0 {
		// Without Listen it caps nothing, but the program's own server
		// has connections too: the open-log budget leaves them as many.
		c.MaxConnections = defaultMaxConnections()
	}
	if c.MaxOpenLogs == 0 {
		c.MaxOpenLogs = runtime.DefaultMaxOpenLogsBeside(max(c.MaxConnections, 0))
	}
	return c
}

// EtcdEndpoints are the etcd client endpoints Metastore names; nil for
// the embedded metastore of a node alone.
func (c Config) EtcdEndpoints() ([]string, error) { return etcdEndpoints(c.Metastore) }

// Validate says what in c no node can serve with, naming the flag.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("data-dir is required")
	}
	if c.Codec != "none" && c.Codec != "zstd" {
		return fmt.Errorf("codec %q: want none or zstd", c.Codec)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("give both --tls-cert and --tls-key, or neither")
	}
	if c.SegmentMaxBytes < 1<<10 {
		return fmt.Errorf("segment-max-bytes %d: give 1024 or more", c.SegmentMaxBytes)
	}
	if c.ScrubRate != 0 && c.ScrubRate < scrub.MinRate {
		return fmt.Errorf("scrub-rate %d: give %d bytes a second or more, or 0 to turn the scrubber off", c.ScrubRate, scrub.MinRate)
	}
	if c.MaxBodyBytes <= 0 {
		return errors.New("max-body-bytes must be positive")
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("shutdown-timeout %v: it bounds a graceful stop and must be positive", time.Duration(c.ShutdownTimeout))
	}
	if c.DiskCheckBudget < 0 {
		return fmt.Errorf("disk-check-budget %v: give a positive duration, or 0 to turn the check off", time.Duration(c.DiskCheckBudget))
	}
	if c.MaxInflightBytes != 0 && c.MaxInflightBytes < c.MaxBodyBytes {
		return fmt.Errorf("max-inflight-bytes %d is under max-body-bytes %d: the largest body could never be taken; raise it, or 0 for no bound", c.MaxInflightBytes, c.MaxBodyBytes)
	}
	if c.MaxAnswerBytes != 0 && c.MaxAnswerBytes < api.MaxFetchBytes {
		return fmt.Errorf("max-answer-bytes %d is under %d, the largest max_bytes a read may ask for; raise it, or 0 for no bound", c.MaxAnswerBytes, api.MaxFetchBytes)
	}
	endpoints, err := etcdEndpoints(c.Metastore)
	if err != nil {
		return err
	}
	if endpoints == nil && (c.NodeID != "" || c.AdvertiseAddr != "" || c.PeerCA != "") {
		return errors.New("node-id, advertise-addr and peer-ca are a cluster's node's: give --metastore etcd://... too")
	}
	if c.NodeID != "" {
		if err := datadir.ValidateNodeID(c.NodeID); err != nil {
			return err
		}
	}
	if c.MemberTTL < Duration(time.Second) {
		return fmt.Errorf("member-ttl %v: etcd's leases count whole seconds; give 1s or more", time.Duration(c.MemberTTL))
	}
	if c.FenceAfter < Duration(time.Second) {
		return fmt.Errorf("fence-after %v: give 1s or more", time.Duration(c.FenceAfter))
	}
	if c.Listen == "" {
		if endpoints != nil && c.AdvertiseAddr == "" {
			return errors.New("a cluster's node served by its embedding program's own server (no listen address) needs --advertise-addr")
		}
		return nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", c.Listen, err)
	}
	if !isLoopback(host) && c.AuthTokenFile == "" && !c.Insecure {
		return fmt.Errorf("listen %q is not loopback: give --auth-token-file, or --insecure to serve without authentication", c.Listen)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
