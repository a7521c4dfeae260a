module github.com/herenow/herenow/clients/go

go 1.19
