package tool

// Verify: an fsck of a data directory, run without a daemon. It walks
// every segment of every partition under DIR/topics/ with the walker of
// walk.go, CRC-checks every frame, decodes every record, and reports per
// partition what it found. It lists, without checking them, the copies a
// cluster's node set aside under DIR/lost/ (runtime.SetAsidePartition):
// never served, they are neither damage nor part of the verdict. It opens
// everything read-only and writes nothing.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// verifyProgressEvery is how many segments Verify checks between two
// progress lines on its Messages.
const verifyProgressEvery = 1000

// hwmFileLimit bounds the read of an hwm file; the engine reads it with the
// same bound and calls anything longer damaged.
const hwmFileLimit = 64

// Problem kinds, as they appear in the JSON report.
const (
	problemTornTail       = "torn_tail"       // damage with no valid frame after it in its segment
	problemGap            = "gap"             // damage under a valid later frame: offsets lost for good
	problemUndecodable    = "undecodable"     // a frame whose CRC passes but whose payload does not decode
	problemMissingOffsets = "missing_offsets" // a sealed segment ends before its successor's base
	problemOverlap        = "overlap"         // a sealed segment runs past its successor's base
	problemHWMDamaged     = "hwm_damaged"     // the hwm file has a length or value no writer leaves
	problemHWMPastTail    = "hwm_past_tail"   // the hwm file promises offsets no segment holds
	problemUnreadable     = "unreadable"      // an I/O error: the bytes could not be checked
)

// VerifyOptions says what Verify checks and where what is not the report
// goes.
type VerifyOptions struct {
	// DataDir is the data directory to check, the one a node opens.
	DataDir string
	// JSON writes the report as one JSON document instead of text.
	JSON bool
	// Messages receives the lines that are not the report: a progress
	// line every 1,000 segments and the warning that a running process
	// holds the data directory. nil discards them.
	Messages io.Writer
	// FS is the file system read; nil is the real one (vfs.OS).
	FS vfs.FS
}

// Verify checks every frame (CRC, position, records) of every segment of
// every partition under the data directory's topics/ and writes a report
// to w: per partition, its segments, frames, records, offsets, hwm file
// and every problem found; then the quarantined, skipped and set-aside
// directories, and a summary. It reports whether everything it checked
// is clean; a partition that could not be read is not. An error means
// there is no verdict: the data directory itself could not be read (not
// a directory, no topics/), or the report could not be written.
func Verify(w io.Writer, opts VerifyOptions) (clean bool, err error) {
	files, messages := filesAndMessages(opts.FS, opts.Messages)
	v := verifier{files: files, progress: messages, progressEvery: verifyProgressEvery}
	report, err := v.run(opts.DataDir)
	if err != nil {
		return false, err
	}
	report.InUseBy = warnInUse(files, messages, "verify", opts.DataDir)
	out := bufio.NewWriter(w)
	if opts.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		writeVerifyText(out, report)
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return false, fmt.Errorf("write report: %w", err)
	}
	return report.Clean, nil
}

// verifyReport is the whole report; in JSON it is printed as it is.
type verifyReport struct {
	DataDir string `json:"data_dir"`
	// InUseBy names the process that held the data directory's lock while
	// verify ran: a torn tail it reports may be a write in flight.
	InUseBy    string            `json:"in_use_by,omitempty"`
	Clean      bool              `json:"clean"`
	Partitions []partitionReport `json:"partitions"`
	// Quarantined lists the topics/<name>.stale-<id> directories: a deleted
	// incarnation's leftovers, never served, not checked.
	Quarantined []string `json:"quarantined"`
	// Skipped lists entries of topics/ that are neither a topic directory
	// nor a quarantined one.
	Skipped []string `json:"skipped"`
	// SetAside lists what lost/ holds, relative to the data directory:
	// lost/<topic>.<incarnation>/<partition dir>.<unix ms>, a cluster
	// node's copies of partitions reassigned while it was lost, never
	// served, not checked, and no part of Clean. SetAsideUnreadable is
	// why lost/ (or a directory in it) could not be listed, if so.
	SetAside           []string     `json:"set_aside"`
	SetAsideUnreadable string       `json:"set_aside_unreadable,omitempty"`
	Totals             verifyTotals `json:"totals"`
}

type verifyTotals struct {
	Partitions        int   `json:"partitions"`
	DamagedPartitions int   `json:"damaged_partitions"`
	Segments          int   `json:"segments"`
	Bytes             int64 `json:"bytes"`
	Frames            int64 `json:"frames"`
	Records           int64 `json:"records"`
}

// partitionReport is what verify found in one partition directory. Offsets
// are those of the frames accepted in sequence; FirstOffset and LastOffset
// are null when there is none.
type partitionReport struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Dir       string `json:"dir"`
	Clean     bool   `json:"clean"`
	Segments  int    `json:"segments"`
	Bytes     int64  `json:"bytes"`
	Frames    int64  `json:"frames"`  // frames accepted in sequence (CRC and position)
	Records   int64  `json:"records"` // records decoded from them
	// StartOffset is the first segment's base (retention deletes below it).
	StartOffset int64  `json:"start_offset"`
	FirstOffset *int64 `json:"first_offset"`
	LastOffset  *int64 `json:"last_offset"`
	// NextOffset is where the active segment's frames end: the offset an
	// open would append at next.
	NextOffset int64     `json:"next_offset"`
	HWM        hwmReport `json:"hwm"`
	Problems   []problem `json:"problems"`
}

// hwmReport is the hwm file's state: "value" (Value holds it), "empty",
// "missing", "damaged" or "unreadable".
type hwmReport struct {
	State string `json:"state"`
	Value *int64 `json:"value,omitempty"`
}

// problem is one piece of damage. Offsets are a half-open range [From, To);
// Byte is where the damage starts in Segment and ResumeByte where valid
// frames resume.
type problem struct {
	Kind       string `json:"kind"`
	Segment    string `json:"segment,omitempty"` // file name in the partition directory
	Sealed     bool   `json:"sealed,omitempty"`
	Byte       *int64 `json:"byte,omitempty"`
	ResumeByte *int64 `json:"resume_byte,omitempty"`
	Bytes      *int64 `json:"bytes,omitempty"` // bytes of a torn tail, to the end of the file
	From       *int64 `json:"from,omitempty"`
	To         *int64 `json:"to,omitempty"`
	Detail     string `json:"detail"`
}

func ptr[T any](v T) *T { return &v }

// verifier checks one data directory.
type verifier struct {
	files         vfs.FS
	progress      io.Writer // progress lines; nil for none
	progressEvery int       // segments between two progress lines

	walker        *walker
	segmentsTotal int
	segmentsDone  int
	bytesDone     int64
}

// partitionPlan is a partition directory and its segments, listed before
// anything is checked so that progress can say how far along it is.
type partitionPlan struct {
	topic     string
	partition int
	dir       string
	segments  []segmentName // sorted by base
	listErr   error
}

type segmentName struct {
	base int64
	name string
}

// run checks dataDir. An error means the data directory itself could not be
// read (exit 2); everything below it is reported in the report.
func (v *verifier) run(dataDir string) (*verifyReport, error) {
	fi, err := v.files.Stat(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dataDir)
	}
	topicsDir := filepath.Join(dataDir, wire.TopicsDirName)
	entries, err := v.files.ReadDir(topicsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s has no %s/ directory: not a narad data directory", dataDir, wire.TopicsDirName)
	}
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	report := &verifyReport{DataDir: dataDir, Clean: true, Partitions: []partitionReport{}, Quarantined: []string{}, Skipped: []string{}}
	report.SetAside, report.SetAsideUnreadable = v.listSetAside(dataDir)
	var plans []partitionPlan
	for _, e := range entries {
		if _, _, ok := wire.ParseStaleDirName(e.Name); ok && e.IsDir {
			report.Quarantined = append(report.Quarantined, e.Name)
			continue
		}
		if !e.IsDir || wire.ValidateTopicName(e.Name) != nil {
			report.Skipped = append(report.Skipped, e.Name)
			continue
		}
		topicPlans, err := v.planTopic(topicsDir, e.Name)
		if err != nil {
			// The topic directory cannot be listed: report it as one
			// unreadable pseudo-partition rather than give up on the rest.
			plans = append(plans, partitionPlan{topic: e.Name, partition: -1, dir: filepath.Join(topicsDir, e.Name), listErr: err})
			continue
		}
		plans = append(plans, topicPlans...)
	}
	for _, p := range plans {
		v.segmentsTotal += len(p.segments)
	}
	v.walker = newWalker()
	for _, p := range plans {
		pr := v.checkPartition(p)
		report.Partitions = append(report.Partitions, pr)
		t := &report.Totals
		t.Partitions++
		if !pr.Clean {
			t.DamagedPartitions++
			report.Clean = false
		}
		t.Segments += pr.Segments
		t.Bytes += pr.Bytes
		t.Frames += pr.Frames
		t.Records += pr.Records
	}
	return report, nil
}

// listSetAside lists the entries of lost/ two levels down (a topic's and
// incarnation's directory, then its copies), as paths relative to the data
// directory; an entry of lost/ that is not a directory is listed itself. A
// missing lost/ holds nothing; a listing that fails is said in unreadable,
// with what could be listed.
func (v *verifier) listSetAside(dataDir string) (copies []string, unreadable string) {
	copies = []string{}
	lostDir := filepath.Join(dataDir, wire.LostDirName)
	entries, err := v.files.ReadDir(lostDir)
	if errors.Is(err, fs.ErrNotExist) {
		return copies, ""
	}
	if err != nil {
		return copies, fmt.Sprintf("list %s: %v", lostDir, err)
	}
	var failed []string
	for _, e := range entries {
		if !e.IsDir {
			copies = append(copies, filepath.Join(wire.LostDirName, e.Name))
			continue
		}
		inner, err := v.files.ReadDir(filepath.Join(lostDir, e.Name))
		if err != nil {
			failed = append(failed, fmt.Sprintf("list %s: %v", filepath.Join(lostDir, e.Name), err))
			continue
		}
		for _, c := range inner {
			copies = append(copies, filepath.Join(wire.LostDirName, e.Name, c.Name))
		}
	}
	return copies, strings.Join(failed, "; ")
}

// planTopic lists a topic's partition directories and their segments.
// Entries that are not partition directories (the incarnation marker, a
// move's staging directory) are not the walk's business.
func (v *verifier) planTopic(topicsDir, topic string) ([]partitionPlan, error) {
	dir := filepath.Join(topicsDir, topic)
	entries, err := v.files.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var plans []partitionPlan
	for _, e := range entries {
		p, err := wire.ParsePartitionDirName(e.Name)
		if err != nil || !e.IsDir {
			continue
		}
		plan := partitionPlan{topic: topic, partition: p, dir: filepath.Join(dir, e.Name)}
		plan.segments, plan.listErr = v.listSegments(plan.dir)
		plans = append(plans, plan)
	}
	return plans, nil
}

// listSegments returns the segment files of a partition directory, sorted
// by base offset.
func (v *verifier) listSegments(dir string) ([]segmentName, error) {
	entries, err := v.files.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var segments []segmentName
	for _, e := range entries {
		if base, err := wire.ParseSegmentFileName(e.Name); err == nil && !e.IsDir {
			segments = append(segments, segmentName{base: base, name: e.Name})
		}
	}
	sort.Slice(segments, func(i, j int) bool { return segments[i].base < segments[j].base })
	return segments, nil
}

// checkPartition walks every segment of one partition. The last segment is
// the active one; each sealed segment's range ends at its successor's base.
func (v *verifier) checkPartition(p partitionPlan) partitionReport {
	pr := partitionReport{Topic: p.topic, Partition: p.partition, Dir: p.dir, Problems: []problem{}}
	if p.listErr != nil {
		pr.HWM = hwmReport{State: "unreadable"}
		pr.Problems = append(pr.Problems, problem{Kind: problemUnreadable, Detail: p.listErr.Error()})
		return pr
	}
	pr.HWM = v.readHWM(p.dir, &pr)
	for _, detail := range v.walker.useDictionaries(v.files, filepath.Dir(p.dir)) {
		pr.Problems = append(pr.Problems, problem{Kind: problemUnreadable, Detail: detail})
	}
	if len(p.segments) > 0 {
		pr.StartOffset = p.segments[0].base
	}
	for i, seg := range p.segments {
		sealed := i < len(p.segments)-1
		successor := int64(-1)
		if sealed {
			successor = p.segments[i+1].base
		}
		tail, size, err := v.checkSegment(p.dir, seg, sealed, successor, &pr)
		pr.Segments++
		pr.Bytes += size
		if err != nil {
			pr.Problems = append(pr.Problems, problem{Kind: problemUnreadable, Segment: seg.name, Sealed: sealed, Detail: err.Error()})
		}
		if !sealed {
			pr.NextOffset = tail
		}
		v.segmentDone(size)
	}
	if pr.HWM.Value != nil && *pr.HWM.Value > pr.NextOffset && !hasUnreadable(pr.Problems) {
		pr.Problems = append(pr.Problems, problem{Kind: problemHWMPastTail, From: ptr(pr.NextOffset), To: ptr(*pr.HWM.Value),
			Detail: fmt.Sprintf("the hwm file says %d but the active segment's frames end at offset %d: offsets that were visible are gone", *pr.HWM.Value, pr.NextOffset)})
	}
	pr.Clean = len(pr.Problems) == 0
	return pr
}

func hasUnreadable(problems []problem) bool {
	for _, p := range problems {
		if p.Kind == problemUnreadable {
			return true
		}
	}
	return false
}

// checkSegment walks one segment and adds what it finds to pr. It returns
// the offset after its last frame in sequence and the file's size; an
// error is an I/O error (the segment could not be checked).
func (v *verifier) checkSegment(dir string, seg segmentName, sealed bool, successor int64, pr *partitionReport) (tail, size int64, err error) {
	path := filepath.Join(dir, seg.name)
	f, err := v.files.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return seg.base, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return seg.base, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	size = fi.Size
	onFrame := func(pos int64, h wire.FrameHeader, frame []byte) {
		pr.Frames++
		if pr.FirstOffset == nil {
			pr.FirstOffset = ptr(h.BaseOffset)
		}
		pr.LastOffset = ptr(h.EndOffset() - 1)
		if err := v.walker.decodedRecords(h, frame, nil); err != nil {
			pr.Problems = append(pr.Problems, problem{Kind: problemUndecodable, Segment: seg.name, Sealed: sealed,
				Byte: ptr(pos), From: ptr(h.BaseOffset), To: ptr(h.EndOffset()),
				Detail: "the CRC passes but the payload does not decode: " + err.Error()})
			return
		}
		pr.Records += int64(h.RecordCount)
	}
	onDamage := func(d damage) {
		detail := d.reason
		if d.misplaced() {
			detail = "misplaced frame: " + detail
		}
		if !d.tornTail() {
			pr.Problems = append(pr.Problems, problem{Kind: problemGap, Segment: seg.name, Sealed: sealed,
				Byte: ptr(d.pos), ResumeByte: ptr(d.resumeAt), From: ptr(d.expect), To: ptr(d.resumeBase), Detail: detail})
			return
		}
		p := problem{Kind: problemTornTail, Segment: seg.name, Sealed: sealed, Byte: ptr(d.pos), Bytes: ptr(size - d.pos),
			From: ptr(d.expect), Detail: detail}
		if sealed && successor > d.expect {
			p.To = ptr(successor)
		}
		pr.Problems = append(pr.Problems, p)
	}
	res, err := v.walker.walk(f, size, seg.base, onFrame, onDamage)
	if err != nil {
		return res.tail, size, err
	}
	if sealed {
		switch {
		case res.tail < successor && res.tornAt < 0:
			pr.Problems = append(pr.Problems, problem{Kind: problemMissingOffsets, Segment: seg.name, Sealed: true,
				From: ptr(res.tail), To: ptr(successor),
				Detail: fmt.Sprintf("the sealed segment's frames end at offset %d, its successor starts at %d", res.tail, successor)})
		case res.tail > successor:
			pr.Problems = append(pr.Problems, problem{Kind: problemOverlap, Segment: seg.name, Sealed: true,
				From: ptr(successor), To: ptr(res.tail),
				Detail: fmt.Sprintf("the sealed segment's frames run to offset %d, past its successor's base %d: the engine never reads them there", res.tail, successor)})
		}
	}
	return res.tail, size, nil
}

// readHWM reads the partition's hwm file the way the engine does: missing
// and empty hold no value, 8 bytes hold one, anything else is damage.
func (v *verifier) readHWM(dir string, pr *partitionReport) hwmReport {
	b, err := vfs.ReadFile(v.files, filepath.Join(dir, wire.HWMFileName), hwmFileLimit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return hwmReport{State: "missing"}
	case errors.Is(err, vfs.ErrFileTooLarge):
		pr.Problems = append(pr.Problems, problem{Kind: problemHWMDamaged, Detail: err.Error()})
		return hwmReport{State: "damaged"}
	case err != nil:
		pr.Problems = append(pr.Problems, problem{Kind: problemUnreadable, Detail: "hwm file: " + err.Error()})
		return hwmReport{State: "unreadable"}
	}
	value, present, err := wire.DecodeOffsetFile(b)
	switch {
	case err != nil:
		pr.Problems = append(pr.Problems, problem{Kind: problemHWMDamaged, Detail: "hwm file: " + err.Error()})
		return hwmReport{State: "damaged"}
	case !present:
		return hwmReport{State: "empty"}
	}
	return hwmReport{State: "value", Value: ptr(value)}
}

// segmentDone counts a checked segment and writes a progress line every
// progressEvery segments.
func (v *verifier) segmentDone(size int64) {
	v.segmentsDone++
	v.bytesDone += size
	if v.progress != nil && v.progressEvery > 0 && v.segmentsDone%v.progressEvery == 0 {
		fmt.Fprintf(v.progress, "verify: %d/%d segments, %s\n", v.segmentsDone, v.segmentsTotal, humanBytes(v.bytesDone))
	}
}

// writeVerifyText writes the report as text: one line per partition, an
// indented line per problem, a line per quarantined, skipped or set-aside
// directory, and a summary.
func writeVerifyText(w io.Writer, r *verifyReport) {
	if r.InUseBy != "" {
		fmt.Fprintf(w, "note: %s is in use by %s: a torn tail below may be a write in flight\n", r.DataDir, r.InUseBy)
	}
	for _, p := range r.Partitions {
		name := p.Topic
		if p.Partition >= 0 {
			dirName, _ := wire.PartitionDirName(p.Partition)
			name += "/" + dirName
		}
		status := "ok"
		if !p.Clean {
			status = "DAMAGED"
		}
		offsets := "no records"
		if p.FirstOffset != nil {
			offsets = fmt.Sprintf("offsets %d..%d", *p.FirstOffset, *p.LastOffset)
		}
		fmt.Fprintf(w, "%s: %s, %d segments, %s, %d frames, %d records, %s, next %d, hwm %s\n",
			name, status, p.Segments, humanBytes(p.Bytes), p.Frames, p.Records, offsets, p.NextOffset, p.HWM.text())
		for _, pb := range p.Problems {
			fmt.Fprintf(w, "  %s\n", pb.text())
		}
	}
	for _, q := range r.Quarantined {
		fmt.Fprintf(w, "%s: quarantined, not checked\n", q)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "%s: not a topic directory, skipped\n", s)
	}
	for _, c := range r.SetAside {
		fmt.Fprintf(w, "%s: set aside (a copy of a partition reassigned while its node was lost), not served, not checked\n", c)
	}
	if r.SetAsideUnreadable != "" {
		fmt.Fprintf(w, "%s: set-aside copies not all listed: %s\n", wire.LostDirName, r.SetAsideUnreadable)
	}
	t := r.Totals
	verdict := "clean"
	if !r.Clean {
		verdict = fmt.Sprintf("DAMAGED (%d of %d partitions)", t.DamagedPartitions, t.Partitions)
	}
	fmt.Fprintf(w, "verify %s: %d partitions, %d segments, %s, %d frames, %d records: %s\n",
		r.DataDir, t.Partitions, t.Segments, humanBytes(t.Bytes), t.Frames, t.Records, verdict)
}

func (h hwmReport) text() string {
	if h.Value != nil {
		return fmt.Sprint(*h.Value)
	}
	return h.State
}

// text renders a problem on one line.
func (p problem) text() string {
	var b strings.Builder
	segment := p.Segment
	if p.Sealed {
		segment = "sealed " + segment
	}
	switch p.Kind {
	case problemGap:
		fmt.Fprintf(&b, "gap: offsets %s lost in %s: damage at byte %d, frames resume at byte %d",
			offsetRange(*p.From, *p.To), segment, *p.Byte, *p.ResumeByte)
	case problemTornTail:
		fmt.Fprintf(&b, "torn tail: %s from byte %d to the end (%d bytes), after offset %d", segment, *p.Byte, *p.Bytes, *p.From-1)
		if p.To != nil {
			fmt.Fprintf(&b, ": offsets %s missing before the next segment", offsetRange(*p.From, *p.To))
		}
	case problemUndecodable:
		fmt.Fprintf(&b, "undecodable frame: offsets %s in %s at byte %d", offsetRange(*p.From, *p.To), segment, *p.Byte)
	case problemMissingOffsets:
		fmt.Fprintf(&b, "missing offsets: %s in %s", offsetRange(*p.From, *p.To), segment)
	case problemOverlap:
		fmt.Fprintf(&b, "overlap: offsets %s of %s lie past its successor's base", offsetRange(*p.From, *p.To), segment)
	case problemHWMPastTail:
		fmt.Fprintf(&b, "hwm past the tail: offsets %s missing", offsetRange(*p.From, *p.To))
	case problemHWMDamaged:
		b.WriteString("hwm file damaged")
	default:
		b.WriteString(strings.ReplaceAll(p.Kind, "_", " "))
		if p.Segment != "" {
			fmt.Fprintf(&b, ": %s", segment)
		}
	}
	if p.Detail != "" {
		fmt.Fprintf(&b, ": %s", p.Detail)
	}
	return b.String()
}

// offsetRange renders the half-open range [from, to) as an inclusive
// "first..last (count)".
func offsetRange(from, to int64) string {
	if to <= from {
		return fmt.Sprintf("%d..%d (0)", from, to)
	}
	return fmt.Sprintf("%d..%d (%d)", from, to-1, to-from)
}

// humanBytes renders a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, exp := float64(n)/unit, 0
	for value >= unit && exp < 4 {
		value /= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", value, "KMGTP"[exp])
}
