package tool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// TestVerifyAndInspectReadDictionaryFrames: frames compressed with a
// topic's dictionary are read by verify and inspect with the topic's
// dictionary file; without the file, each such frame is listed as
// undecodable, its dictionary named, and inspect says the same.
func TestVerifyAndInspectReadDictionaryFrames(t *testing.T) {
	dataDir := t.TempDir()
	topicDir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
	var samples [][]byte
	for i := range 200 {
		samples = append(samples, fmt.Appendf(nil, `{"order_id":%d,"status":"paid","currency":"EUR"}`, i))
	}
	dict, err := codec.TrainDictionary(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(topicDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := partition.StoreDictionaryFile(vfs.OS{}, topicDir, dict, 1); err != nil {
		t.Fatal(err)
	}
	set := &codec.DictionarySet{}
	if err := set.Add(dict); err != nil {
		t.Fatal(err)
	}
	if err := set.SetCurrent(dict.ID()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(topicDir, "p00000")
	tp := buildLogWith(t, dir, partition.Options{FS: vfs.OS{}, SegmentMaxBytes: 1 << 20, Dictionaries: set}, 20, func(offset int64) []partition.Record {
		return []partition.Record{{Key: fmt.Appendf(nil, "k%d", offset), Value: fmt.Appendf(nil, `{"order_id":%d,"status":"shipped","currency":"EUR"}`, offset)}}
	})
	if h := framesOf(t, tp.active())[0].h; h.Codec != wire.CodecZstdDict {
		t.Fatalf("codec %d, want zstd-dict", h.Codec)
	}
	code, report, _ := verifyJSON(t, dataDir)
	if pr := findPartition(t, report, "orders", 0); code != 0 || pr.Records != 20 || !pr.Clean {
		t.Fatalf("verify with the dictionary: exit %d: %+v", code, pr)
	}
	code, stdout, _ := inspectRun(t, InspectOptions{Segment: tp.active(), Records: true, MaxBytes: defaultMaxBytes})
	if code != 0 || !strings.Contains(stdout, " codec: zstd-dict ") || !strings.Contains(stdout, `order_id\":7,`) {
		t.Fatalf("inspect with the dictionary: exit %d:\n%s", code, stdout)
	}

	name, _ := wire.DictionaryFileName(dict.ID())
	if err := os.Remove(filepath.Join(topicDir, name)); err != nil {
		t.Fatal(err)
	}
	code, report, _ = verifyJSON(t, dataDir)
	pr := findPartition(t, report, "orders", 0)
	problems := pr.Problems
	for _, p := range problems {
		if p.Kind != problemUndecodable {
			t.Fatalf("verify without the dictionary: a problem of kind %s: %+v", p.Kind, p)
		}
	}
	if code == 0 || len(problems) != 20 || !strings.Contains(problems[0].Detail, fmt.Sprintf("dictionary missing: dictionary %d", dict.ID())) {
		t.Fatalf("verify without the dictionary: exit %d, %d problems: %+v", code, len(problems), problems[:min(1, len(problems))])
	}
	code, stdout, _ = inspectRun(t, InspectOptions{Segment: tp.active(), MaxBytes: defaultMaxBytes})
	if code == 0 || !strings.Contains(stdout, fmt.Sprintf("dictionary %d", dict.ID())) {
		t.Fatalf("inspect without the dictionary: exit %d:\n%s", code, stdout)
	}
}

// TestVerifyGivesEachPartitionItsTopicsDictionaryProblems: a topic's
// dictionary file that does not check out is listed in the report of
// every partition of the topic whose frames it leaves undecodable, not
// only the first one walked.
func TestVerifyGivesEachPartitionItsTopicsDictionaryProblems(t *testing.T) {
	dataDir := t.TempDir()
	topicDir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
	var samples [][]byte
	for i := range 200 {
		samples = append(samples, fmt.Appendf(nil, `{"order_id":%d,"status":"paid","currency":"EUR"}`, i))
	}
	dict, err := codec.TrainDictionary(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(topicDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := partition.StoreDictionaryFile(vfs.OS{}, topicDir, dict, 1); err != nil {
		t.Fatal(err)
	}
	set := &codec.DictionarySet{}
	if err := set.Add(dict); err != nil {
		t.Fatal(err)
	}
	if err := set.SetCurrent(dict.ID()); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		dir := filepath.Join(topicDir, fmt.Sprintf("p%05d", p))
		buildLogWith(t, dir, partition.Options{FS: vfs.OS{}, SegmentMaxBytes: 1 << 20, Dictionaries: set}, 5, func(offset int64) []partition.Record {
			return []partition.Record{{Value: fmt.Appendf(nil, `{"order_id":%d,"status":"shipped","currency":"EUR"}`, offset)}}
		})
	}
	name, _ := wire.DictionaryFileName(dict.ID())
	path := filepath.Join(topicDir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, report, _ := verifyJSON(t, dataDir)
	for p := range 2 {
		pr := findPartition(t, report, "orders", p)
		listed := false
		for _, problem := range pr.Problems {
			listed = listed || strings.Contains(problem.Detail, "dictionary file "+name)
		}
		if !listed {
			t.Errorf("partition %d's report does not list the damaged dictionary file: %+v", p, pr.Problems)
		}
	}
}
