package bench

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ServerP99 is the daemon's own view of a workload's tail, from the
// differences of its histograms over the workload (docs/metrics.md): the
// p99 of its produce requests' time to answer (the body's arrival, the
// queue for the partition's commit and the commit), of its durable
// commits (drain, write, fdatasync, read back) and of its segment
// fdatasyncs, each in milliseconds, interpolated within its bucket. Set
// beside a client's p99 it says where a latency was spent: in the load
// generator or the network (client p99 well above the request's), in
// the node's queue for a commit (request well above commit), or in the
// disk (commit close to fsync).
type ServerP99 struct {
	RequestMs float64 `json:"request_p99_ms"`
	CommitMs  float64 `json:"commit_p99_ms"`
	FsyncMs   float64 `json:"fsync_p99_ms"`
}

// The histograms ServerP99 reads, and the produce route's label.
const (
	requestHistogram = "narad_http_request_duration_seconds"
	commitHistogram  = "narad_storage_commit_seconds"
	fsyncHistogram   = "narad_storage_fsync_seconds"
	produceRoute     = `route="POST /v1/topics/{topic}/partitions/{p}/records"`
)

// histograms is a scrape's cumulative bucket counts, by histogram and
// upper bound (summed over the series a filter keeps).
type histograms map[string]map[float64]float64

// scrapeHistograms reads the daemon's /metrics: the buckets of the
// request histogram of the produce route and of the commit and fsync
// histograms. A histogram not observed yet has no series; after
// produces, each must have them (present), or the names here are wrong.
func scrapeHistograms(addr string, present bool) (histograms, error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	resp, err := hc.Get(addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := histograms{}
	for line := range strings.Lines(string(b)) {
		for _, h := range []struct{ name, filter string }{{requestHistogram, produceRoute}, {commitHistogram, ""}, {fsyncHistogram, ""}} {
			rest, ok := strings.CutPrefix(line, h.name+"_bucket{")
			if !ok || !strings.Contains(rest, h.filter) {
				continue
			}
			labels, value, ok := strings.Cut(rest, "} ")
			if !ok {
				return nil, fmt.Errorf("/metrics: a bucket line without a value: %q", line)
			}
			_, le, ok := strings.Cut(labels, `le="`)
			if !ok {
				return nil, fmt.Errorf("/metrics: a bucket line without le: %q", line)
			}
			le, _, _ = strings.Cut(le, `"`)
			bound, err := strconv.ParseFloat(le, 64)
			if err != nil {
				return nil, fmt.Errorf("/metrics: bucket bound %q: %w", le, err)
			}
			count, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return nil, fmt.Errorf("/metrics: bucket count %q: %w", value, err)
			}
			if out[h.name] == nil {
				out[h.name] = map[float64]float64{}
			}
			out[h.name][bound] += count
		}
	}
	for _, name := range []string{requestHistogram, commitHistogram, fsyncHistogram} {
		if present && len(out[name]) == 0 {
			return nil, fmt.Errorf("the daemon's /metrics has no %s buckets", name)
		}
	}
	return out, nil
}

// p99Since is the p99 of what was observed between the scrape before and
// this one, for each histogram.
func (h histograms) p99Since(before histograms) ServerP99 {
	q := func(name string) float64 { return 1000 * quantileOfDelta(before[name], h[name], 0.99) }
	return ServerP99{RequestMs: q(requestHistogram), CommitMs: q(commitHistogram), FsyncMs: q(fsyncHistogram)}
}

// quantileOfDelta is the q-quantile of the observations counted in after
// and not in before (cumulative buckets by upper bound), interpolated
// linearly within its bucket; 0 with none. An observation past the last
// finite bound is given that bound.
func quantileOfDelta(before, after map[float64]float64, q float64) float64 {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total <= 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		count := after[b] - before[b]
		if count >= rank {
			if math.IsInf(b, 1) {
				return lower
			}
			return lower + (b-lower)*(rank-below)/max(count-below, 1)
		}
		if !math.IsInf(b, 1) {
			lower = b
		}
		below = count
	}
	return lower
}
