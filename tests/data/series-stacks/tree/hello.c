int one = 0;

int two = 0;

int three = 0;

int kit = 0;
