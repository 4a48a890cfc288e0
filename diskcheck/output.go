package diskcheck

// A report as the command prints it: text for a person, JSON for a
// script; a program that embeds the probe gets the same bytes.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteText writes r for a person: what the file system is, what was
// measured, then each check's finding with what to do, and a last line
// counting errors and warnings.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "disk check of %s\n", r.Dir)
	fmt.Fprintf(&b, "  file system      %s\n", fsText(r))
	fmt.Fprintf(&b, "  rounds           %d of %d in %s (budget %s%s)\n", r.Rounds, r.RoundsPlanned, durText(r.Duration), r.Budget, map[bool]string{true: ", spent", false: ""}[r.BudgetSpent])
	for _, l := range []struct {
		name string
		l    Latency
	}{{"fdatasync, append", r.Append}, {"fdatasync, overwrite", r.Overwrite}, {"directory fsync", r.DirFsync}} {
		if l.l.Samples > 0 {
			fmt.Fprintf(&b, "  %-20s p50 %s  p99 %s  max %s  (%d samples)\n", l.name, durText(l.l.P50), durText(l.l.P99), durText(l.l.Max), l.l.Samples)
		}
	}
	b.WriteString("\n")
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "%-8s %-12s %s\n", f.Severity, f.Check, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(&b, "%-8s %-12s fix: %s\n", "", "", f.Fix)
		}
	}
	fmt.Fprintf(&b, "\n%d errors, %d warnings\n", r.Count(Error), r.Count(Warning))
	_, err := io.WriteString(w, b.String())
	return err
}

func fsText(r Report) string {
	if r.FSErr != nil {
		return "unknown: " + r.FSErr.Error()
	}
	s := r.FS.Type
	if r.FS.Device != "" {
		s += " on device " + r.FS.Device
		if r.FS.WriteCache != "" {
			s += ", write cache: " + r.FS.WriteCache
		}
	} else {
		s += ", no block device of its own"
	}
	return s
}

// jsonReport is a report's JSON document: durations in seconds, errors
// as their text.
type jsonReport struct {
	Dir           string           `json:"dir"`
	FileSystem    jsonFS           `json:"file_system"`
	Append        jsonLatency      `json:"fdatasync_append"`
	Overwrite     jsonLatency      `json:"fdatasync_overwrite"`
	DirFsync      jsonLatency      `json:"dir_fsync"`
	Fallocate     string           `json:"fallocate"`
	Free          jsonFree         `json:"free"`
	Descriptors   *jsonDescriptors `json:"descriptors,omitempty"`
	Leftovers     int              `json:"leftovers_removed"`
	Rounds        int              `json:"rounds"`
	RoundsPlanned int              `json:"rounds_planned"`
	Budget        float64          `json:"budget_seconds"`
	BudgetSpent   bool             `json:"budget_spent"`
	Duration      float64          `json:"duration_seconds"`
	Findings      []Finding        `json:"findings"`
	Errors        int              `json:"errors"`
	Warnings      int              `json:"warnings"`
}

type jsonFS struct {
	Type       string `json:"type,omitempty"`
	Magic      string `json:"magic,omitempty"`
	Device     string `json:"device,omitempty"`
	WriteCache string `json:"write_cache,omitempty"`
	Error      string `json:"error,omitempty"`
}

type jsonLatency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_seconds"`
	P99     float64 `json:"p99_seconds"`
	Max     float64 `json:"max_seconds"`
	Error   string  `json:"error,omitempty"`
}

// jsonDescriptors has a limit of null for an unlimited one.
type jsonDescriptors struct {
	Limit    *uint64 `json:"limit"`
	OpenLogs int     `json:"open_logs"`
	Needed   uint64  `json:"needed"`
}

type jsonFree struct {
	Bytes       uint64 `json:"bytes"`
	Inodes      uint64 `json:"inodes"`
	FloorBytes  uint64 `json:"floor_bytes"`
	FloorInodes uint64 `json:"floor_inodes"`
	Error       string `json:"error,omitempty"`
}

// WriteJSON writes r as one JSON document (docs/operations.md, "Disk
// check", gives its fields).
func WriteJSON(w io.Writer, r Report) error {
	doc := jsonReport{Dir: r.Dir, Append: latencyJSON(r.Append), Overwrite: latencyJSON(r.Overwrite), DirFsync: latencyJSON(r.DirFsync),
		Free:      jsonFree{Bytes: r.Free.Bytes, Inodes: r.Free.Inodes, FloorBytes: r.MinFreeBytes, FloorInodes: r.MinFreeInodes, Error: errText(r.FreeErr)},
		Leftovers: r.LeftoversRemoved, Rounds: r.Rounds, RoundsPlanned: r.RoundsPlanned,
		Budget: r.Budget.Seconds(), BudgetSpent: r.BudgetSpent, Duration: r.Duration.Seconds(), Findings: r.Findings,
		Errors: r.Count(Error), Warnings: r.Count(Warning)}
	if d := r.Descriptors; d != nil {
		doc.Descriptors = &jsonDescriptors{OpenLogs: d.OpenLogs, Needed: d.Needed}
		if d.Limit != Unlimited {
			doc.Descriptors.Limit = &d.Limit
		}
	}
	if r.FSErr != nil {
		doc.FileSystem.Error = r.FSErr.Error()
	} else {
		doc.FileSystem = jsonFS{Type: r.FS.Type, Magic: fmt.Sprintf("%#x", r.FS.Magic), Device: r.FS.Device, WriteCache: r.FS.WriteCache}
	}
	switch f, _ := r.Finding(CheckFallocate); {
	case r.Fallocate:
		doc.Fallocate = "ok"
	case r.FallocateErr != nil:
		doc.Fallocate = r.FallocateErr.Error()
	default:
		doc.Fallocate = string(f.Severity)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func latencyJSON(l Latency) jsonLatency {
	return jsonLatency{Samples: l.Samples, P50: l.P50.Seconds(), P99: l.P99.Seconds(), Max: l.Max.Seconds(), Error: errText(l.Err)}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
