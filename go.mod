module github.com/rebootkit/rebootkit

go 1.26

require (
	github.com/google/go-cmp v0.7.0
	github.com/stmcginnis/gofish v0.26.0
	github.com/stretchr/testify v1.12.1
	go.etcd.io/bbolt v1.5.0
	pgregory.net/rapid v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
