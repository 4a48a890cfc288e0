package partition

import (
	"github.com/narad-io/storage/internal/promshare"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the counters and histograms every log of a process shares
// (docs/architecture.md, "Metrics").
type Metrics struct {
	// Errors is errors_total{component,kind}; other components count into
	// it too.
	Errors *prometheus.CounterVec

	commitSeconds    prometheus.Histogram
	fsyncSeconds     prometheus.Histogram
	commitGroupSize  prometheus.Histogram
	bytesWritten     prometheus.Counter
	recordsWritten   prometheus.Counter
	bytesRead        prometheus.Counter
	recordsRead      prometheus.Counter
	openLogs         prometheus.Gauge
	frameCacheHits   prometheus.Counter
	frameCacheMisses prometheus.Counter
	recoverySeconds  prometheus.Histogram
	tornTails        prometheus.Counter
	gapsRecorded     prometheus.Counter
	retentionBytes   *prometheus.CounterVec
	retentionRecords *prometheus.CounterVec
	segmentsRolled   prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg; a nil reg
// registers nothing (a library never uses the global registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	latency := prometheus.ExponentialBuckets(50e-6, 2, 18) // 50µs .. ~6.5s
	m := &Metrics{
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "errors_total", Help: "Errors by component and kind.",
		}, []string{"component", "kind"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "narad_storage_commit_seconds", Help: "Durable commit latency: drain, write, fdatasync, read back.", Buckets: latency,
		}),
		fsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "narad_storage_fsync_seconds", Help: "fdatasync latency of segment files.", Buckets: latency,
		}),
		commitGroupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "narad_storage_commit_group_size", Help: "Produce calls coalesced into one commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_written_frame_bytes_total", Help: "Frame bytes written to segments: headers and (compressed) payloads, as on disk.",
		}),
		recordsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_written_records_total", Help: "Records written to segments.",
		}),
		bytesRead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_read_record_bytes_total", Help: "Key and value bytes of the records reads served.",
		}),
		recordsRead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_read_records_total", Help: "Records served by reads.",
		}),
		openLogs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "narad_storage_open_logs", Help: "Partition logs open now.",
		}),
		frameCacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_frame_cache_hits_total", Help: "Reads served from the decoded frame cache.",
		}),
		frameCacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_frame_cache_misses_total", Help: "Reads that had to read and decode a frame.",
		}),
		recoverySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "narad_storage_recovery_seconds", Help: "Time to open (recover) a log.", Buckets: latency,
		}),
		tornTails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_torn_tails_truncated_total", Help: "Torn tails recovery truncated.",
		}),
		gapsRecorded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_gaps_recorded_total", Help: "Damaged frames under valid later frames, recorded as permanent gaps.",
		}),
		retentionBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "narad_storage_retention_deleted_bytes_total", Help: "Segment bytes deleted by retention.",
		}, []string{"reason"}),
		retentionRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "narad_storage_retention_deleted_records_total", Help: "Records deleted by retention.",
		}, []string{"reason"}),
		segmentsRolled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_storage_segments_rolled_total", Help: "Segments sealed by a roll.",
		}),
	}
	// Every series an alert may name exists from the start, at zero.
	for _, kind := range []string{kindFsyncPoisoned, kindRetentionUnlink, kindCommitFailed, kindWriteFailed, kindReadCorrupt, kindHWMFile, kindTimeIndex} {
		m.Errors.WithLabelValues("storage", kind)
	}
	for _, reason := range []string{reasonAge, reasonSize} {
		m.retentionBytes.WithLabelValues(reason)
		m.retentionRecords.WithLabelValues(reason)
	}
	// Nodes on one registerer share the metrics (promshare).
	m.Errors = promshare.Register(reg, m.Errors)
	m.commitSeconds = promshare.Register(reg, m.commitSeconds)
	m.fsyncSeconds = promshare.Register(reg, m.fsyncSeconds)
	m.commitGroupSize = promshare.Register(reg, m.commitGroupSize)
	m.bytesWritten = promshare.Register(reg, m.bytesWritten)
	m.recordsWritten = promshare.Register(reg, m.recordsWritten)
	m.bytesRead = promshare.Register(reg, m.bytesRead)
	m.recordsRead = promshare.Register(reg, m.recordsRead)
	m.openLogs = promshare.Register(reg, m.openLogs)
	m.frameCacheHits = promshare.Register(reg, m.frameCacheHits)
	m.frameCacheMisses = promshare.Register(reg, m.frameCacheMisses)
	m.recoverySeconds = promshare.Register(reg, m.recoverySeconds)
	m.tornTails = promshare.Register(reg, m.tornTails)
	m.gapsRecorded = promshare.Register(reg, m.gapsRecorded)
	m.retentionBytes = promshare.Register(reg, m.retentionBytes)
	m.retentionRecords = promshare.Register(reg, m.retentionRecords)
	m.segmentsRolled = promshare.Register(reg, m.segmentsRolled)
	return m
}

// Error kinds counted in errors_total{component="storage"}.
const (
	kindFsyncPoisoned   = "fsync_poisoned"
	kindRetentionUnlink = "retention_unlink"
	kindCommitFailed    = "commit_failed"
	kindWriteFailed     = "write_failed"
	kindReadCorrupt     = "read_corrupt"
	kindHWMFile         = "hwm_file"
	kindTimeIndex       = "time_index"
)

func (m *Metrics) countError(kind string) {
	m.Errors.WithLabelValues("storage", kind).Inc()
}
