package runtime

import (
	"errors"
	"fmt"
	"testing"

	"github.com/narad-io/storage/partition"
)

// TestNode_ReadFuncLendsTheRecordsReadReturns: Node.ReadFunc lends a
// partition's committed records in order, with Read's limits.
func TestNode_ReadFuncLendsTheRecordsReadReturns(t *testing.T) {
	n := startNode(t, nil, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 2, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 1, recs("orders", 1, 0, 10)); err != nil {
		t.Fatal(err)
	}
	var got []string
	sum, err := n.ReadFunc(bg, "orders", 1, 2, 5, 1<<20, func(r partition.ReadRecord) error {
		got = append(got, fmt.Sprintf("%d=%s", r.Offset, r.Value))
		return nil
	})
	want := []string{"2=orders/1/2", "3=orders/1/3", "4=orders/1/4", "5=orders/1/5", "6=orders/1/6"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) || sum.Next != 7 || sum.HighWatermark != 10 || sum.Records != 5 {
		t.Fatalf("ReadFunc: %v, %+v, %v; want %v, next 7", got, sum, err, want)
	}
	if _, err := n.ReadFunc(bg, "orders", 2, 0, 5, 1<<20, func(partition.ReadRecord) error { return nil }); !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("ReadFunc of partition 2 of 2: %v, want ErrPartitionNotFound", err)
	}
}

// TestNode_ReadFuncNeverRelendsAfterFnRefuses: an error from fn ends the
// read and comes back as it is, even one the node would otherwise take
// for a closed log and retry: fn never sees a record twice.
func TestNode_ReadFuncNeverRelendsAfterFnRefuses(t *testing.T) {
	n := startNode(t, nil, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 10)); err != nil {
		t.Fatal(err)
	}
	for _, refuseAt := range []int64{0, 3} {
		calls := 0
		sum, err := n.ReadFunc(bg, "orders", 0, 0, 100, 1<<20, func(r partition.ReadRecord) error {
			calls++
			if r.Offset == refuseAt {
				return fmt.Errorf("forwarding: %w", partition.ErrLogClosed)
			}
			return nil
		})
		if !errors.Is(err, partition.ErrLogClosed) || calls != int(refuseAt)+1 || sum.Records != int(refuseAt) || sum.Next != refuseAt {
			t.Fatalf("refused at %d: %v after %d calls, %+v; want fn's error after %d calls, next %d", refuseAt, err, calls, sum, refuseAt+1, refuseAt)
		}
	}
}
