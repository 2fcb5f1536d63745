package reboot

import (
	"errors"

	"github.com/rebootkit/rebootkit/power"
)

// CallClass is the outcome class of a power call as decisions need it in
// Call.Class: power.Classify, except that a call that was not carried out
// is power.ClassBusy, "not tried, try again after Config.RetryDelay". Not
// carried out are a refused login (power.ErrAuth: a password rotation in
// progress, say), a power.Pool's refusal while it backs off
// (power.ErrBackoff), a call the Pool or the adapter never sent
// (power.ErrNotSent: no session, or the adapter's own refusal before
// sending, such as a press it holds back), and a Guard's or a power wrapper's refusal for
// leadership (an error wrapping ErrNotLeader): none says anything about
// the host or its OS, so none may turn a soft power-off into a hard one;
// only SoftTimeout does.
func CallClass(err error) power.Class {
	if notCarriedOut(err) {
		return power.ClassBusy
	}
	return power.Classify(err)
}

// notCarriedOut reports whether err says the call never reached the
// hardware: a refused login, a Pool's back-off, a call never sent
// (power.ErrNotSent), a refusal for leadership. (A timeout or a busy
// answer may have been carried out.)
func notCarriedOut(err error) bool {
	return err != nil && (errors.Is(err, power.ErrAuth) || errors.Is(err, power.ErrBackoff) || errors.Is(err, power.ErrNotSent) ||
		errors.Is(err, ErrNotLeader))
}

// answerLost reports whether err is the outcome of a call whose answer
// never came (assumption A5): not a refusal before the call reached the
// hardware (notCarriedOut), and not an answer of the BMC's, which a
// power.Error with a protocol status (an HTTP status, an IPMI completion
// code) or of class unsupported is (power.Pool calls such an error
// answered): a timeout, a broken connection, a lost datagram, a call
// still running in the background (kube.Async). A status that says the
// call's own outcome is unknown (IPMI C3h, CEh; HTTP 502, 504: see
// power.Error.Answered) is no answer either.
func answerLost(err error) bool {
	if err == nil || notCarriedOut(err) {
		return false
	}
	var pe *power.Error
	if errors.As(err, &pe) && pe.Answered() {
		return false
	}
	return power.Classify(err) != power.ClassUnsupported
}
