package store

// Retention decides, one session at a time, which of a session's old
// messages a purge keeps. Both backends read the same inputs (the active
// view, the views revertible compactions restore, the compactions' items)
// and share this closure, so the kept set is the same everywhere.

// Retained returns the ids a purge keeps in one session: roots (the active
// view and the views its revertible compactions restore) and every original
// a kept summary or placeholder replaced, to any depth (a summary of
// summaries), following the items' new_id → replaced edges. Items without a
// new id (a drop) replace nothing that can come back.
//
// Work is the ids and edges it visited: each item's edges are indexed once
// and each reached id's edges are followed once, so work and memory are
// linear in len(roots) plus the items' replaced ids.
func Retained(roots []string, items []CompactionItem) (keep map[string]struct{}, work int64) {
	edges := make(map[string][]string)
	for _, it := range items {
		work += 1 + int64(len(it.Replaced))
		if it.NewID != "" {
			edges[it.NewID] = append(edges[it.NewID], it.Replaced...)
		}
	}
	keep = make(map[string]struct{}, len(roots))
	queue := make([]string, 0, len(roots))
	for _, id := range roots {
		work++
		if _, ok := keep[id]; !ok {
			keep[id] = struct{}{}
			queue = append(queue, id)
		}
	}
	for len(queue) > 0 {
		id := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, r := range edges[id] {
			work++
			if _, ok := keep[r]; !ok {
				keep[r] = struct{}{}
				queue = append(queue, r)
			}
		}
	}
	return keep, work
}

// AppendRetentionInputs decodes one compaction's stored items and the view
// it restores (stored "[]" when it can no longer be reverted) onto roots and
// items.
func AppendRetentionInputs(roots []string, items []CompactionItem, itemsText, viewText string) ([]string, []CompactionItem, error) {
	var its []CompactionItem
	if err := DecodeJSON(itemsText, &its); err != nil {
		return roots, items, err
	}
	var view []string
	if err := DecodeJSON(viewText, &view); err != nil {
		return roots, items, err
	}
	return append(roots, view...), append(items, its...), nil
}

// Doomed returns the ids among old (a session's messages created before the
// cutoff) that Retained does not keep, and the work both did.
func Doomed(roots []string, items []CompactionItem, old []string) (doomed []string, work int64) {
	keep, work := Retained(roots, items)
	for _, id := range old {
		work++
		if _, ok := keep[id]; !ok {
			doomed = append(doomed, id)
		}
	}
	return doomed, work
}
