package partition

import (
	"fmt"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// SegmentDamage is one place where a segment's frames leave their
// sequence, as WalkSegment reports it.
type SegmentDamage struct {
	Pos          int64            // byte where the damaged or misplaced frame starts
	Header       wire.FrameHeader // its header, when HeaderParsed (CRC unchecked)
	HeaderParsed bool
	Misplaced    bool  // the frame at Pos checks out but carries another base offset (R5)
	Torn         bool  // the bytes at Pos end before the frame they start does
	Reason       error // what is wrong with the bytes at Pos
	// Expect is the offset the sequence expected at Pos; -1 when unknown
	// (a walk given no base, before its first valid frame).
	Expect int64
	// ResumeAt is where frames resume in sequence, at a frame whose base
	// offset is ResumeBase: the offsets [Expect, ResumeBase) are a gap.
	// -1 when no valid frame follows: a torn tail from Pos to the end.
	ResumeAt   int64
	ResumeBase int64
}

// TornTail reports whether nothing valid follows the damage.
func (d SegmentDamage) TornTail() bool { return d.ResumeAt < 0 }

// SegmentWalk is what one walk of a segment found.
type SegmentWalk struct {
	Frames    int64 // frames accepted in sequence
	FirstBase int64 // base offset of the first accepted frame; -1 when none
	Tail      int64 // offset after the last accepted frame (the expected base when none)
	TailPos   int64 // byte after the last accepted frame
	TornAt    int64 // where a torn tail starts; -1 when none
	// UnwrittenAt is where zeros start that run to the end of the file:
	// space the log allocated ahead of its frames (preallocation) and
	// never wrote, the end of the log and not damage; -1 when none.
	UnwrittenAt int64
}

// WalkSegment reads the frames of a segment file of size bytes in order,
// with the decisions recovery makes (partition/doc.go, R2 and R5): the
// first frame at base (or anywhere, with base -1), each next at the
// previous one's end; anything else is damage, and the walk resumes at the
// next valid frame past the expected offset. Damage with nothing valid
// after it is a torn tail, except zeros to the end of the file, which are
// unwritten space (UnwrittenAt; docs/design.md, "Commit speed"). onFrame
// gets every frame accepted (its bytes valid until it returns), onDamage
// every departure, in file order. Only an I/O error fails the walk.
// Recovery and the offline tools (tool.Verify, tool.Inspect) both use it,
// so what they call a gap or a torn tail is what an open does.
func WalkSegment(file vfs.File, size, base int64, onFrame func(pos int64, h wire.FrameHeader, frame []byte), onDamage func(SegmentDamage)) (SegmentWalk, error) {
	sc := newScanner(file, size, size)
	defer sc.release()
	expect := base
	res := SegmentWalk{FirstBase: -1, Tail: expect, TornAt: -1, UnwrittenAt: -1}
	for pos := int64(0); pos < size; {
		h, frame, status, err := sc.frameAt(pos)
		if err != nil && isIOError(err) {
			return res, err
		}
		if status == frameValid && (expect < 0 || h.BaseOffset == expect) {
			if res.FirstBase < 0 {
				res.FirstBase = h.BaseOffset
			}
			if onFrame != nil {
				onFrame(pos, h, frame)
			}
			pos += h.FrameLen()
			expect = h.EndOffset()
			res.Frames++
			res.Tail, res.TailPos = expect, pos
			continue
		}
		if zeros, err := sc.zerosFrom(pos); err != nil {
			return res, err
		} else if zeros {
			res.UnwrittenAt = pos
			break
		}
		d := SegmentDamage{Pos: pos, Header: h, HeaderParsed: h.RecordCount >= 1, Misplaced: status == frameValid,
			Torn: status == frameTorn, Reason: err, Expect: expect, ResumeAt: -1, ResumeBase: -1}
		if d.Misplaced {
			d.Reason = fmt.Errorf("valid frame with base offset %d where offset %d was expected", h.BaseOffset, expect)
		}
		at, next, found, err := sc.resync(pos, expect, h)
		if err != nil {
			return res, err
		}
		if found {
			d.ResumeAt, d.ResumeBase = at, next.BaseOffset
		}
		if onDamage != nil {
			onDamage(d)
		}
		if !found {
			res.TornAt = pos
			break
		}
		// INVARIANT: the frame at 'at' is valid and claims offsets past
		// expect, so the next pass accepts it and the walk moves forward.
		expect = next.BaseOffset
		pos = at
	}
	return res, nil
}
