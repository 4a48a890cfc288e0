package partition

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// proofPart is the part a large frame is checked in (scanner.readChecked)
// and a proven one lent in (lendProven): a lending read's largest window,
// small enough to stay in a core's cache between the read that fills it,
// its check and the consumer.
const proofPart = readWindowMax

// frameProof is what a check of a large uncompressed frame proved, so a
// later lending read can stream the frame a part at a time through one
// small window, checking each part against its proven state before it
// lends a record from it, instead of reading and checking the whole frame
// before lending any of it (whose first records have left the CPU's caches
// by the time the consumer reads them).
//
// A frame is proven when its CRC and every record's envelope checked out:
// by the commit's read-back of a frame this log wrote from envelopes it
// built, or by a read that decoded it. The proof keeps the CRC-32C state
// after each part of proofPart bytes; a part read again that brings its
// predecessor's state to its own holds the bytes that were proven, with
// the frame CRC's own strength. A part that does not (the bytes changed
// since: a block re-read from a failing disk) ends the proof, and the read
// goes the way of any other: the whole frame, checked, or damage.
//
// Invariants (it never changes): sums[i] is the state after the frame's
// bytes [0, min((i+1)*proofPart, bytes)), and the last one matches the
// header's CRC; firsts[i] is the first record starting in part i or
// later; the frame sits at pos of seg, holds offsets [base, end), and
// every record in it parses.
type frameProof struct {
	seg        *segment
	pos, bytes int64
	base, end  int64
	crc        uint32 // the header's, which the sums leave out with the magic
	sums       []wire.FrameSum
	firsts     []partFirst
}

// partFirst is a record by its index in its frame and the byte of the
// frame its length starts at.
type partFirst struct{ index, pos int64 }

// memory is what a proof holds of the cache's budget.
func (p *frameProof) memory() int { return 120 + 16*cap(p.sums) + 16*cap(p.firsts) }

// newProof is the proof of the large uncompressed frame of more than one
// record at pos of seg that sc checked last (nil when it is not such a
// frame), once its records checked out too.
func newProof(sc *scanner, seg *segment, pos int64, h wire.FrameHeader) *frameProof {
	if sc.sumsAt != pos || h.Codec != wire.CodecNone || h.RecordCount < 2 || len(sc.sums) == 0 || len(sc.parts.firsts) != len(sc.sums) {
		return nil
	}
	return &frameProof{seg: seg, pos: pos, bytes: h.FrameLen(), base: h.BaseOffset, end: h.EndOffset(), crc: h.CRC,
		sums: slices.Clone(sc.sums), firsts: slices.Clone(sc.parts.firsts)}
}

// partIndex finds, as a check of a frame reads it part by part, the first
// record starting in each part or later, by walking the records' lengths
// in the bytes each part adds while they are still in the CPU's cache.
//
// Invariant: next is the byte the length of the record of index index
// starts at, or -1 when the walk gave up (a compressed frame, or lengths
// that do not end at the frame's end: its CRC or structure fails and it is
// never proven); firsts holds the parts before the one holding next.
type partIndex struct {
	firsts      []partFirst
	next, index int64
}

// reset starts a walk of a frame, whose payload holds records when
// uncompressed.
func (w *partIndex) reset(uncompressed bool) {
	w.firsts, w.next, w.index = w.firsts[:0], -1, 0
	if uncompressed {
		w.next = wire.FrameHeaderSize
	}
}

// add walks the record starts in frame, the frame's bytes so far.
func (w *partIndex) add(frame []byte) {
	for w.next >= 0 && w.next+wire.RecordLenSize <= int64(len(frame)) {
		for int64(len(w.firsts)) <= w.next/proofPart {
			w.firsts = append(w.firsts, partFirst{w.index, w.next})
		}
		w.next += wire.RecordLenSize + int64(binary.BigEndian.Uint32(frame[w.next:]))
		w.index++
	}
}

// finish ends the walk of h's frame of parts parts: the parts past the
// last record start point at the frame's end, and a walk that did not
// end exactly there, after every record, leaves no index.
func (w *partIndex) finish(h wire.FrameHeader, parts int) {
	if w.next != h.FrameLen() || w.index != int64(h.RecordCount) {
		w.firsts, w.next = w.firsts[:0], -1
		return
	}
	for len(w.firsts) < parts {
		w.firsts = append(w.firsts, partFirst{w.index, w.next})
	}
}

// proofStreamMin is what a lending read must be able to take of a proven
// frame for lendProven to serve it: the read starts by reading the whole
// part that holds its first record, so a read of at least four parts
// wastes at most a quarter of what it reads. A read that takes less (or
// the rest of the frame, if that is less) goes the ordinary way, which
// reads the frame once and keeps it in the cache for the reads after.
const proofStreamMin = 4 * proofPart

// streams reports whether rd may take enough of proven frame p from
// rd.next on for lendProven to serve it: proofStreamMin bytes of records,
// or the rest of the frame.
func (rd *reader) streams(p *frameProof) bool {
	return rd.streamsFrame(p.bytes, p.base, p.end)
}

// streamsFrame is streams for the frame of size bytes holding offsets
// [base, end).
func (rd *reader) streamsFrame(size, base, end int64) bool {
	perRecord := size / (end - base)
	want := min(proofStreamMin, (end-max(rd.next, base))*perRecord)
	return int64(rd.maxBytes-rd.bytes) >= want && int64(rd.maxRecords-rd.records) >= (want+perRecord-1)/perRecord
}

// proofCarryMove is how much of a record cut by a part's end lendProven
// moves to its buffer's front before it reads the next part.
const proofCarryMove = 64 << 10

// headerMatches reports whether part 0 of p's frame, read again, starts
// with the header p proved, magic and CRC included, which the part's sum
// leaves out.
func headerMatches(part0 []byte, p *frameProof) bool {
	h, err := wire.ParseFrameHeader(part0)
	return err == nil && h.CRC == p.crc && h.BaseOffset == p.base
}

// proofFor is the proof of the frame holding rd.next, for a lending read
// that takes enough of it to stream it.
func (l *Log) proofFor(rd *reader, lend bool) *frameProof {
	if !lend {
		return nil
	}
	if p := l.cache.proof(rd.next); p != nil && rd.streams(p) {
		return p
	}
	return nil
}

// lendProven lends rd the records of the proven frame p from rd.next on,
// reading the frame a part at a time, each checked against p, and reports
// whether the read may go on. Whatever surprises it (the segment gone, a
// failed or short read, a part whose bytes changed, a record that does not
// parse) drops the proof and, when none of the frame's records was lent
// yet, asks the caller to read the frame the ordinary way (fallback),
// which says what is wrong; after lent records the read ends there, and
// the next read meets it the ordinary way.
func (l *Log) lendProven(v *view, rd *reader, p *frameProof) (more, fallback bool) {
	seg, _, limit := v.segmentFor(rd.next)
	if seg != p.seg || p.pos+p.bytes > limit || p.end > v.hwm {
		return false, true // never met: a proven frame is one the view holds whole
	}
	file, err := seg.file.acquire()
	if err != nil {
		return false, true
	}
	defer seg.file.release()
	if seg != v.active {
		l.hot.touch(seg)
	}

	// Start at the part holding rd.next's record: the last whose first
	// record is at or before it.
	k := sort.Search(len(p.firsts), func(i int) bool { return p.base+p.firsts[i].index > rd.next }) - 1
	offset := p.base + p.firsts[k].index // the record the walk is at
	lent, stopped := false, false
	changed := int64(-1) // the part whose bytes no longer match p
	cursor, whole := walkParts(file, p.pos, p.bytes, p.firsts[k].pos,
		func(part int64, b []byte) bool {
			sum := wire.FrameSum{}
			if part > 0 {
				sum = p.sums[part-1]
			}
			if sum.Write(b); sum != p.sums[part] || part == 0 && !headerMatches(b, p) {
				changed = part
				return false
			}
			return true
		},
		func(_ int64, rec []byte) bool {
			key, committedAt, value, err := wire.SplitEnvelope(rec)
			if err != nil || offset >= p.end {
				return false
			}
			if offset >= rd.next {
				if !rd.offer(ReadRecord{Offset: offset, CommittedAtUnixMs: committedAt, Key: key, Value: value}) {
					stopped = true
					return false
				}
				lent = true
			}
			offset++
			stopped = rd.full() && offset < p.end
			return !stopped
		})
	switch {
	case stopped:
		return false, false
	case !whole || offset != p.end || cursor != p.bytes:
		if changed >= 0 && lent { // the read ends before the part; the damage is the next read's
			l.damaged(seg, p.pos, &UnreadableError{Offset: offset, Next: p.end, Cause: fmt.Errorf("%s byte %d: %w: part %d of the frame at byte %d changed since its check", seg.path, p.pos+changed*proofPart, wire.ErrCorrupt, changed, p.pos)})
		}
		l.cache.dropProof(p)
		return false, !lent
	}
	l.cache.remember(seg, p.base, p.end, p.pos, p.bytes)
	return !rd.full(), false
}

// walkParts reads the frame of size bytes at pos of file from the part
// holding byte cursor on, a part of proofPart bytes at a time, through
// one pooled buffer: each part to onPart as it arrives, then each record
// whose bytes it completed to onRecord (its length at byte at of the
// frame, rec the bytes after the length), the first at cursor, which must
// be where a record's length starts. A record cut by a part's end waits
// for the parts it needs: a small one moves to the buffer's front, so the
// window stays where the CPU's cache has it; one larger than the buffer
// gets a buffer of its own up to the end of the part it ends in, never
// past the frame's end (a corrupt length costs at most the frame's size).
// A callback that returns false ends the walk. It returns the byte where
// the next record's length starts and whether it read to the frame's end
// (false: a callback ended it, or a read failed or came up short).
func walkParts(file vfs.File, pos, size, cursor int64, onPart func(part int64, b []byte) bool, onRecord func(at int64, rec []byte) bool) (next int64, whole bool) {
	buf, pooled := getBuf(2 * proofPart) // a part and what a record cut by its start keeps
	defer func() { putBuf(pooled) }()
	part := cursor / proofPart
	bufAt, have := part*proofPart, int64(0) // buf[:have] holds the frame's bytes [bufAt, bufAt+have)
	need := int64(0)                        // the frame's bytes the record at cursor needs, when more than buf holds
	for ; part*proofPart < size; part++ {
		start, end := part*proofPart, min((part+1)*proofPart, size)
		// Keep only the record cut at cursor: moved to the buffer's front
		// when it is small or when there is no room behind it; a large
		// record stays where it is while parts of it are read behind it.
		if cut := bufAt + have - cursor; have > 0 && (cut <= proofCarryMove || have+end-start > int64(len(buf))) {
			keep := buf[cursor-bufAt : have]
			room := int64(len(keep)) + end - start
			if need > end { // a record past this part: room up to the end of the part it ends in
				room = min((need+proofPart-1)/proofPart*proofPart, size) - cursor
			}
			if room > int64(len(buf)) {
				next, nextPooled := getBuf(int(room))
				copy(next, keep)
				putBuf(pooled)
				buf, pooled = next, nextPooled
			} else {
				copy(buf, keep)
			}
			bufAt, have = cursor, int64(len(keep))
		}
		into := buf[have : have+end-start]
		if got, _ := file.ReadAt(into, pos+start); got < len(into) {
			return cursor, false
		}
		if !onPart(part, into) {
			return cursor, false
		}
		have += end - start
		for held := bufAt + have; cursor+wire.RecordLenSize <= held; {
			at := cursor - bufAt
			n := int64(binary.BigEndian.Uint32(buf[at:]))
			if cursor+wire.RecordLenSize+n > held {
				need = cursor + wire.RecordLenSize + n
				break
			}
			if !onRecord(cursor, buf[at+wire.RecordLenSize:at+wire.RecordLenSize+n]) {
				return cursor, false
			}
			cursor += wire.RecordLenSize + n
		}
	}
	return cursor, true
}

// proveInPartsOver is the frame size past which a lending read that will
// stream a frame not yet proven proves it in parts (proveInParts) rather
// than reading it whole: the largest buffer the pool keeps by size class.
// Past it, holding the frame whole costs a buffer the size of the frame
// (up to wire.MaxFrameBytes, never pooled past maxHugeBytes) and gains no
// speed: the second read of each part and its second checksum cost about
// what records lent from a buffer that has left the CPU's caches do
// (BenchmarkReadFunc, frames of 16 MiB: 0.45-0.47 of a plain read in
// parts, 0.39-0.43 whole). Below it, reading the frame once is faster:
// frames of 1.1 MiB (256 B x 4096) read about a quarter slower in parts.
const proveInPartsOver = maxPooledBytes

// proveInParts checks the frame at pos with header h, larger than a part,
// uncompressed and of more than one record, the way lendProven reads a
// proven one: a part at a time through one small buffer, each part's
// checksum state kept as it arrives, each record's envelope parsed while
// its part is in the CPU's cache. It reports whether the frame proved
// whole (its CRC, its lengths ending exactly at its end after every
// record, every envelope), leaving sums, parts and sumsAt as readChecked
// does, for newProof; the frame's bytes are not kept. A lending read that
// will stream such a frame proves it so and lends it with lendProven,
// holding at most two parts where reading it whole would hold the frame
// (up to wire.MaxFrameBytes); the frame is read twice, both times through
// the page cache into a buffer the CPU's cache holds. false (damage, a
// failed or short read) says nothing more: the caller reads the frame the
// ordinary way, which says what is wrong.
func (s *scanner) proveInParts(pos int64, h wire.FrameHeader) bool {
	s.sumsAt = -1
	s.sums = s.sums[:0]
	s.parts.reset(false)
	var sum wire.FrameSum
	index := int64(0)
	end, whole := walkParts(s.file, pos, h.FrameLen(), wire.FrameHeaderSize,
		func(part int64, b []byte) bool {
			if part == 0 { // the header the scan parsed, read again: the sum leaves out its magic and CRC
				if again, err := wire.ParseFrameHeader(b); err != nil || again != h {
					return false
				}
			}
			sum.Write(b)
			s.sums = append(s.sums, sum)
			return true
		},
		func(at int64, rec []byte) bool {
			for int64(len(s.parts.firsts)) <= at/proofPart {
				s.parts.firsts = append(s.parts.firsts, partFirst{index, at})
			}
			index++
			_, _, _, err := wire.SplitEnvelope(rec)
			return err == nil && index <= int64(h.RecordCount)
		})
	if !whole || end != h.FrameLen() || index != int64(h.RecordCount) || sum.Check(h) != nil {
		return false
	}
	for len(s.parts.firsts) < len(s.sums) {
		s.parts.firsts = append(s.parts.firsts, partFirst{index, end})
	}
	s.sumsAt = pos
	return true
}
