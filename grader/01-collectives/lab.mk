# lab.mk: Lab 1's make settings (included by grader/grader.mk). The driver counts the bytes
# each rank receives by wrapping the receiving calls of the library.
GRADER_WRAP_01-collectives := -Wl,--wrap=pl_recv -Wl,--wrap=pl_sendrecv -Wl,--wrap=pl_irecv
