// Command rebootkit-controller runs rebootkit's reboot controller (and,
// with --controllers reboot,remediation, the remediation controller on
// the Cluster API Machines) on the BareMetalHosts of a namespace: the reboot API's annotations
// (reboot.metal3.io, reboot.metal3.io/{key}) decided by the reboot package
// and applied through each host's BMC (Redfish or IPMI, from spec.bmc and
// its credentials Secret). Leader election is on by default, so that
// several replicas never reconcile one host at once.
//
//	rebootkit-controller --kubeconfig ~/.kube/config --namespace metal3
package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rebootkit/rebootkit/kube"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("rebootkit-controller", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: in-cluster, or $KUBECONFIG)")
	namespace := fs.String("namespace", "", "namespace of the BareMetalHosts (required)")
	controllers := fs.String("controllers", "reboot", "controllers to run, comma-separated: reboot, remediation, external-remediation (PowerCycleRemediations of MachineHealthChecks and NodeHealthChecks); both remediations need reboot")
	limit := fs.Int("remediation-limit", 1, "storm guard: at most this many Machines under remediation at once (Machine remediations and PowerCycleRemediations together)")
	remTimeout := fs.Duration("remediation-timeout", 10*time.Minute, "timeout of each remediation phase")
	leaderElect := fs.Bool("leader-elect", true, "elect a leader among replicas (a Lease in the namespace)")
	softTimeout := fs.Duration("soft-timeout", 3*time.Minute, "soft power-off timeout before falling back to hard")
	staleReads := fs.Duration("stale-reads", 30*time.Second, "how long a BMC may report the power state from before a change")
	caFile := fs.String("bmc-ca-file", "", "PEM bundle to verify Redfish BMCs with (default: the system's roots)")
	metrics := fs.String("metrics-bind-address", "0", "metrics endpoint (0: off)")
	probes := fs.String("health-probe-bind-address", ":8081", "liveness (/healthz) and readiness (/readyz) endpoint (0: off)")
	leaseDuration := fs.Duration("lease-duration", 15*time.Second, "leader lease duration (power calls stop a third of it before the lease may end)")
	renewDeadline := fs.Duration("renew-deadline", 10*time.Second, "how long the leader tries to renew its lease")
	retryPeriod := fs.Duration("retry-period", 2*time.Second, "how often leader election is tried and the lease renewed")
	operator := fs.Bool("baremetal-operator", true, "a baremetal-operator runs in the cluster: rebootkit powers only hosts it does not manage (detached, or --unmanaged-hosts) and remediates the others through the operator's reboot annotation")
	unmanaged := fs.String("unmanaged-hosts", "", "label selector of hosts the baremetal-operator does not manage (besides detached ones); "+
		"needs the admission policy of config/admission, without which reboot clients could write those labels")
	withoutPolicy := fs.Bool("without-admission-policy", false, "run without the reboot-client admission policy of config/admission: "+
		"by default no host is acted on (no credentials sent, no power call; an event says why) while that policy and its denying binding "+
		"are not in force; with this flag they are acted on, and a reboot client can redirect the BMC of a host before rebootkit first sees it "+
		"(see the kube package doc)")
	workers := fs.Int("concurrent-reconciles", 32, "hosts reconciled at once (a slow BMC holds one)")
	callTimeout := fs.Duration("bmc-call-timeout", 30*time.Second, "bound on every BMC power call")
	connectTimeout := fs.Duration("bmc-connect-timeout", 30*time.Second, "bound on every BMC login")
	hostsFlag := fs.String("hosts", "", "external remediation: comma-separated node=host pairs naming the BareMetalHost of each Node without a Cluster API Machine; "+
		"trusted (a template's hostMapping.hosts entry is used only where this, a host annotation or a Node label confirms it: the health checker writes the remediation's spec)")
	hostAnnotations := fs.String("host-annotations", "", "external remediation: comma-separated BareMetalHost annotation keys, besides rebootkit.io/node, that a hostMapping is checked under")
	hostLabels := fs.String("host-labels", "", "external remediation: comma-separated Node label keys, besides node-restriction.kubernetes.io/baremetalhost, that a hostMapping is checked under (only node-restriction.kubernetes.io/ ones count)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	hostMap, err := parseHosts(*hostsFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
		return 2
	}
	want := map[string]bool{}
	for _, c := range strings.Split(*controllers, ",") {
		want[strings.TrimSpace(c)] = true
	}
	known := 0
	for _, c := range []string{"reboot", "remediation", "external-remediation"} {
		if want[c] {
			known++
		}
	}
	if *namespace == "" || !want["reboot"] || known != len(want) {
		fmt.Fprintln(os.Stderr, "rebootkit-controller: --namespace is required; --controllers is reboot, optionally with remediation and external-remediation")
		return 2
	}
	own := kube.Ownership{NoOperator: !*operator}
	if *unmanaged != "" {
		sel, err := labels.Parse(*unmanaged)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rebootkit-controller: --unmanaged-hosts:", err)
			return 2
		}
		own.Unmanaged = sel
	}
	ctrl.SetLogger(zap.New())
	if *kubeconfig != "" {
		os.Setenv("KUBECONFIG", *kubeconfig)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
		return 1
	}
	var roots *x509.CertPool
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
			return 1
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			fmt.Fprintln(os.Stderr, "rebootkit-controller: no certificate in", *caFile)
			return 1
		}
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = metal3.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = clusterv1.AddToScheme(scheme)
	opts := ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: *metrics}, HealthProbeBindAddress: *probes,
		LeaderElection: *leaderElect, LeaderElectionID: "rebootkit-reboot", LeaderElectionNamespace: *namespace,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Cache:  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: kube.UncachedObjects()}}}
	// Leadership fences power calls: they are made only while the lease
	// renewed last is held with a margin (kube.LeaseGuard).
	var guard *kube.LeaseGuard
	if *leaderElect {
		host, _ := os.Hostname()
		guard, err = kube.NewLeaseGuard(cfg, *namespace, "rebootkit-reboot", host+"_"+string(uuid.NewUUID()), *leaseDuration, *renewDeadline)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
			return 1
		}
		opts.LeaderElectionResourceLockInterface = guard
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
		return 1
	}
	if own.Unmanaged != nil && *operator {
		// The selector's labels must be out of the reboot clients' reach.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := kube.PolicyInForce(ctx, mgr.GetAPIReader(), "", time.Now(), 0)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rebootkit-controller: --unmanaged-hosts: %v: reboot clients could label an operator's host into rebootkit's hands\n", err)
			return 1
		}
	}
	pool := power.NewPool(power.PoolConfig{CallTimeout: *callTimeout, ConnectTimeout: *connectTimeout})
	rebootCfg := reboot.Config{SoftTimeout: *softTimeout, StaleReads: *staleReads} // the Reconciler's, and the adapter's bounds
	powers := &kube.Powers{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: *namespace, RootCAs: roots, Pool: pool,
		SoftTimeout: rebootCfg.SoftTimeout, StaleReads: rebootCfg.StaleReads, LostLanding: rebootCfg.LostLanding, OffSettle: rebootCfg.OffSettle,
		WithoutAdmissionPolicy: *withoutPolicy, Ownership: &own}
	if guard != nil {
		powers.Guard = guard.Wrap
	}
	if !*withoutPolicy {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := kube.PolicyInForce(ctx, mgr.GetAPIReader(), "", time.Now(), 0)
		cancel()
		if err != nil {
			// Not fatal: the policy may be applied after the controller;
			// Powers reads it again every little while and acts on no
			// host until then (each one's events say so).
			fmt.Fprintf(os.Stderr, "rebootkit-controller: %v: no host is acted on until it is (kubectl apply -k config/admission), "+
				"or run with --without-admission-policy\n", err)
		}
	}
	// On shutdown: the pinned BMCs' background readings are cancelled,
	// and the pool's sessions logged out and closed.
	defer func() { _ = powers.Close() }()
	powerOf := powers.Controller
	if guard != nil {
		powerOf = func(name string) (power.Controller, error) {
			pc, err := powers.Controller(name)
			if err != nil {
				return nil, err
			}
			return guard.Wrap(pc), nil
		}
	}
	// No reconcile worker waits on a BMC (a login to a hung one) for more
	// than a moment: the calls run in the background.
	async := &kube.Async{Power: powerOf, Timeout: 2*(*callTimeout+*connectTimeout) + 30*time.Second}
	powers.Done = func(name string) {
		if async.Done != nil { // set by the RebootController's SetupWithManager
			async.Done(name)
		}
	}
	rec := &reboot.Reconciler{Hosts: &kube.RebootHosts{Client: mgr.GetClient(), Namespace: *namespace}, Power: async.Controller,
		Now: time.Now, Config: rebootCfg}
	if err := (&kube.RebootController{Reconciler: rec, Namespace: *namespace, MaxConcurrentReconciles: *workers, Ownership: own, Async: async,
		Forget: powers.Forget, ReconcileTimeout: 2*(*callTimeout+*connectTimeout) + 30*time.Second}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
		return 1
	}
	if err := addProbes(mgr); err != nil {
		fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	if want["remediation"] {
		if missing := missingCAPI(mgr); missing != "" {
			// Start what can run: the reboot controller does not need the
			// Cluster API. The remediation waits; the process restarts
			// once the CRDs are served, and starts it then.
			fmt.Fprintf(os.Stderr, "rebootkit-controller: the remediation controller waits for the Cluster API CRDs (%s is not served); "+
				"the reboot controller runs; the process restarts once they are installed\n", missing)
			var stop context.CancelFunc
			ctx, stop = context.WithCancel(ctx)
			defer stop()
			go waitCAPI(ctx, mgr, stop)
			want["remediation"] = false
		}
	}
	if want["remediation"] {
		rem := kube.NewRemediationReconciler(mgr.GetClient(), *namespace, own, remediation.Config{Timeout: *remTimeout}, remediation.MaxCount(*limit), time.Now)
		// Each side effect checks the persisted attempt on the API server
		// (not the cache) and runs under the lease guard: a leader paused
		// past its lease writes nothing. The hosts are read with the same
		// reader (NewRemediationReconciler): a request's removal and the
		// held check before a release must see the request the last pass
		// wrote, which the cache may not show yet.
		rem.Machines.(*kube.Machines).Reader = mgr.GetAPIReader()
		// A host is back only once it reads On past its stale-read
		// window after the power-on, which the BMC may have refused.
		kube.SetRemediationPower(rem, async.Controller, *staleReads)
		if guard != nil {
			rem.Guard = guard
		}
		if err := (&kube.RemediationController{Reconciler: rem, Namespace: *namespace}).SetupWithManager(mgr); err != nil {
			fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
			return 1
		}
	}
	if want["external-remediation"] {
		// As the Machine-annotation remediation: the persisted attempt is
		// read from the API server, each side effect under the lease guard.
		xc := &kube.ExternalRemediationController{Client: mgr.GetClient(), Namespace: *namespace, Ownership: own,
			Limit: remediation.MaxCount(*limit), Power: async.Controller, StaleReads: *staleReads, Reader: mgr.GetAPIReader(),
			Hosts: hostMap, HostAnnotations: splitList(*hostAnnotations), HostLabels: splitList(*hostLabels)}
		if guard != nil {
			xc.Guard = guard
		}
		if err := xc.SetupWithManager(mgr); err != nil {
			fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
			return 1
		}
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rebootkit-controller:", err)
		return 1
	}
	return 0
}
