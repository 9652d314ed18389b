module github.com/xlbnet/xlb

go 1.26
