/* demo_model.S: the built-in demo model (app/demo/glm-demo.gguf, trained by
 * app/tools/demo_train), embedded as read-only data.  DEMO_GGUF is the
 * file's path, given by the Makefile. */
    .section .rodata
    .balign 64
    .globl glm_demo_gguf
    .type glm_demo_gguf, @object
glm_demo_gguf:
    .incbin DEMO_GGUF
    .globl glm_demo_gguf_end
glm_demo_gguf_end:
    .section .note.GNU-stack,"",@progbits
