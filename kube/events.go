package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rebootkit/rebootkit/internal/termsafe"
)

// eventf records an event on regarding through c.Recorder (set), its note
// formatted from note and args and then cleaned of control characters
// (termsafe.Clean): the errors it formats may carry a BMC's words, and
// `kubectl describe` and `kubectl get events` print the note on the
// operator's terminal (TestReview39ab_BMCErrorTextEscapesReachEvents).
// The power adapters clean a peer's text at the source already; this
// holds for any other text an error may carry.
func (c *RebootController) eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	c.Recorder.Eventf(regarding, related, eventtype, reason, action, "%s", termsafe.Clean(fmt.Sprintf(note, args...)))
}
