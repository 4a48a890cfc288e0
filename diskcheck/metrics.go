package diskcheck

import (
	"github.com/narad-io/storage/internal/promshare"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a probe's gauges (docs/metrics.md, "Disk check"), each
// labelled with the data directory, as the disk floor's are: what the
// last probe of it (a node's, at its start) measured and found. Every
// check's warning and error series exist from NewMetrics on, at zero, so
// an alert on them never waits for a first finding; the last run's
// timestamp is 0 until a probe ended, so a check that never ran is not
// taken for one that found nothing.
type Metrics struct {
	dir       string
	warnings  *prometheus.GaugeVec // data_dir, check
	errors    *prometheus.GaugeVec // data_dir, check
	fdatasync *prometheus.GaugeVec // data_dir, write, stat
	dirFsync  *prometheus.GaugeVec // data_dir, stat
	duration  *prometheus.GaugeVec // data_dir
	info      *prometheus.GaugeVec // data_dir, fs_type, write_cache
	stalled   *prometheus.GaugeVec // data_dir
	lastRun   *prometheus.GaugeVec // data_dir
}

// NewMetrics registers the gauges of the probes of dir on reg (nil: none;
// nodes on one registerer share them, each its own series).
func NewMetrics(reg prometheus.Registerer, dir string) *Metrics {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return promshare.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append([]string{"data_dir"}, labels...)))
	}
	m := &Metrics{
		dir:       dir,
		warnings:  gauge("narad_disk_check_warnings", "1 when the disk check's last probe found a warning in this check.", "check"),
		errors:    gauge("narad_disk_check_errors", "1 when the disk check's last probe found an error in this check.", "check"),
		fdatasync: gauge("narad_disk_check_fdatasync_seconds", "fdatasync latency of the disk check's 4 KiB writes, by write (append, overwrite) and statistic (p50, p99, max).", "write", "stat"),
		dirFsync:  gauge("narad_disk_check_dir_fsync_seconds", "Directory fsync latency of the disk check, by statistic (p50, p99, max).", "stat"),
		duration:  gauge("narad_disk_check_duration_seconds", "How long the disk check's last probe took."),
		info:      gauge("narad_disk_check_info", "1, labelled with the file system type and the device's write cache the disk check found.", "fs_type", "write_cache"),
		lastRun:   gauge("narad_disk_check_last_run_timestamp_seconds", "When the disk check's last probe ended, in seconds since the epoch; 0 when none has (the check off, or not done yet)."),
		stalled:   gauge("narad_disk_check_stalled", "1 when the start stopped waiting for its disk check: a call of the probe (a flush, most likely) ran past the budget and its margin."),
	}
	m.stalled.WithLabelValues(dir)
	m.lastRun.WithLabelValues(dir)
	for _, check := range Checks {
		m.warnings.WithLabelValues(dir, check)
		m.errors.WithLabelValues(dir, check)
	}
	return m
}

// Set puts a report's measurements and findings in the gauges.
func (m *Metrics) Set(r Report) {
	for _, f := range r.Findings {
		m.warnings.WithLabelValues(m.dir, f.Check).Set(flag(f.Severity == Warning))
		m.errors.WithLabelValues(m.dir, f.Check).Set(flag(f.Severity == Error))
	}
	for _, l := range []struct {
		write string
		l     Latency
	}{{"append", r.Append}, {"overwrite", r.Overwrite}} {
		m.fdatasync.WithLabelValues(m.dir, l.write, "p50").Set(l.l.P50.Seconds())
		m.fdatasync.WithLabelValues(m.dir, l.write, "p99").Set(l.l.P99.Seconds())
		m.fdatasync.WithLabelValues(m.dir, l.write, "max").Set(l.l.Max.Seconds())
	}
	m.dirFsync.WithLabelValues(m.dir, "p50").Set(r.DirFsync.P50.Seconds())
	m.dirFsync.WithLabelValues(m.dir, "p99").Set(r.DirFsync.P99.Seconds())
	m.dirFsync.WithLabelValues(m.dir, "max").Set(r.DirFsync.Max.Seconds())
	m.duration.WithLabelValues(m.dir).Set(r.Duration.Seconds())
	m.lastRun.WithLabelValues(m.dir).Set(float64(r.Ended.UnixNano()) / 1e9)
	m.info.DeletePartialMatch(prometheus.Labels{"data_dir": m.dir})
	fsType := r.FS.Type
	if r.FSErr != nil {
		fsType = "unknown"
	}
	m.info.WithLabelValues(m.dir, fsType, r.FS.WriteCache).Set(1)
}

// SetStalled says the start stopped waiting for the probe of the
// directory: a call of it ran past its bound.
func (m *Metrics) SetStalled() { m.stalled.WithLabelValues(m.dir).Set(1) }

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
