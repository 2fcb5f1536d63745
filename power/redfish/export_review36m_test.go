package redfish

import "time"

// NoteLostReset36m records in the package's lost-reset registry what
// Controller.resetReturned records for a reset POST to endpoint's system
// that got no HTTP answer and returned at (its window ending at until):
// another BMC's lost reset in the same process (review 36 round 13).
func NoteLostReset36m(endpoint, system string, at, until time.Time) {
	windows.note(windowKey(endpoint, system), at, until)
}

// ResetLostWindows36m empties the registry and its floor (the test's
// cleanup, so that its entries do not evict other tests' windows).
func ResetLostWindows36m() {
	windows.mu.Lock()
	defer windows.mu.Unlock()
	windows.m, windows.h, windows.floor = nil, nil, window{}
}

// SetOverdueFloor35v makes a read give its place up only after d (see
// readplace.go) until the returned restore is called.
func SetOverdueFloor35v(d time.Duration) (restore func()) {
	old := overdueFloorSet.Swap(int64(d))
	return func() { overdueFloorSet.Store(old) }
}

// WindowsMax36m is the registry's bound.
func WindowsMax36m() int { return windows.max }
