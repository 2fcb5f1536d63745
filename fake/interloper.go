package fake

import "sync"

// interloper holds a store's second writer: a function called, without the
// store's lock, just before each write of the component under test is
// applied, so that it can write the same record first (an operator's
// command, kubectl, a second reconciler). The store then checks versions as
// usual, and the component under test gets an honest conflict.
type interloper struct {
	mu sync.Mutex
	f  func(key string)
}

func (i *interloper) set(f func(key string)) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.f = f
}

// run calls the interloper for key, if one is set. The store's lock must
// not be held.
func (i *interloper) run(key string) {
	i.mu.Lock()
	f := i.f
	i.mu.Unlock()
	if f != nil {
		f(key)
	}
}
