package redfish

import "strings"

// ForgetWindowsOf drops every system's reset and press windows at
// endpoint from the package's registry: a test's cleanup, so that a later
// test whose server reuses the port (its fake clock starting at the same
// time) does not inherit them.
func ForgetWindowsOf(endpoint string) {
	windows.mu.Lock()
	defer windows.mu.Unlock()
	for k, w := range windows.m {
		if strings.HasPrefix(k, originOf(endpoint)+"\x00") {
			windows.drop(w)
		}
	}
}
