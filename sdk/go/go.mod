module github.com/baton-dev/baton/sdk/go

go 1.24
