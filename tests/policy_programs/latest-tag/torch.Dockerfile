FROM scratch AS wheels
