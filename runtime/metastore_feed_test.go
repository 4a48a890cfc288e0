package runtime

import (
	"slices"
	"testing"
)

// TestMetastore_FeedDeliveryRunsNotificationsWhenTheDelivererDoes: with a
// delivery set (SetFeedDelivery), a change's notification reaches the
// subscribers only when the deliverer runs it, after the change returned;
// with none again, at once.
func TestMetastore_FeedDeliveryRunsNotificationsWhenTheDelivererDoes(t *testing.T) {
	ms, err := OpenLocalMetastore(newTestDisk(t, 1), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var heard []string
	defer ms.Subscribe(func(topic string) { heard = append(heard, topic) })()
	var held []func()
	ms.SetFeedDelivery(func(notify func()) { held = append(held, notify) })
	if _, _, err := ms.CreateTopic(bg, "a", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.SetRetention(bg, "a", Retention{Ms: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := ms.DeleteTopic(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 0 || len(held) != 3 {
		t.Fatalf("before delivery: heard %v, %d held; want nothing heard, 3 held", heard, len(held))
	}
	for _, notify := range held {
		notify()
	}
	if want := []string{"a", "a", "a"}; !slices.Equal(heard, want) {
		t.Fatalf("delivered: heard %v, want %v", heard, want)
	}
	ms.SetFeedDelivery(nil)
	if _, _, err := ms.CreateTopic(bg, "b", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "a", "a", "b"}; !slices.Equal(heard, want) || len(held) != 3 {
		t.Fatalf("no delivery set: heard %v (%d held), want %v", heard, len(held), want)
	}
}
